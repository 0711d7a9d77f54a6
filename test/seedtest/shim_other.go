//go:build !linux

package seedtest

// processPath returns the path to start the binary real with: real itself (the processes outlive a killed test).
func processPath(_, real string) (string, error) { return real, nil }
