//go:build !linux

package seedtest

import "syscall"

// processPath returns the path to start the binary real with: real itself (the processes outlive a killed test).
func processPath(_, real string) (string, error) { return real, nil }

// sysProcAttr returns the attributes of the controller manager's process: the defaults.
func sysProcAttr() *syscall.SysProcAttr { return nil }
