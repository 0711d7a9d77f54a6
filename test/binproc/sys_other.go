//go:build !linux

package binproc

import "syscall"

// sysProcAttr puts a child in its own process group, so that a terminal's Ctrl-C reaches only the parent, which stops
// the children in order. Without Linux's parent-death signal, children outlive a parent that is killed.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
