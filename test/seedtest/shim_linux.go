package seedtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// On Linux, etcd and kube-apiserver die with the test process even when it is killed without running its cleanups
// (a -timeout panic, an interrupt): envtest starts them in their own process group, so nothing else would stop them.
// Each is started through a symlink <seed dir>/bin/<name> to the test binary, next to a symlink <name>.seedtest-real
// to the real binary. The test binary, seeing that in init, sets a parent-death signal and executes the real binary in
// place, keeping the process id envtest signals on Stop.

const (
	// envParent carries the test process's id to the processes it starts; only they act on it.
	envParent  = "TRELLIS_SEEDTEST_PARENT"
	realSuffix = ".seedtest-real"
)

func init() {
	parent, ok := os.LookupEnv(envParent)
	if !ok {
		return
	}
	target, err := os.Readlink(os.Args[0] + realSuffix)
	if err != nil {
		return // an ordinary run of a test binary started by a test
	}
	_ = os.Unsetenv(envParent)
	// The signal is an attribute of the thread, which execve keeps.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "seedtest: set parent-death signal: %v\n", errno)
		os.Exit(2)
	}
	if strconv.Itoa(os.Getppid()) != parent {
		os.Exit(2) // the test process is gone already
	}
	err = syscall.Exec(target, append([]string{target}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "seedtest: exec %s: %v\n", target, err)
	os.Exit(2)
}

var setParent sync.Once

// processPath returns the path to start the binary target with: a symlink to the test binary that executes target.
func processPath(dir, target string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if target, err = filepath.Abs(target); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return "", err
	}
	shim := filepath.Join(bin, filepath.Base(target))
	// A directory reused by a restarted seed (the local landscape) holds the links of the last start.
	_ = os.Remove(shim)
	_ = os.Remove(shim + realSuffix)
	if err := os.Symlink(self, shim); err != nil {
		return "", err
	}
	if err := os.Symlink(target, shim+realSuffix); err != nil {
		return "", err
	}
	setParent.Do(func() { _ = os.Setenv(envParent, strconv.Itoa(os.Getpid())) })
	return shim, nil
}

// sysProcAttr returns the attributes of the controller manager's process: its own process group, like envtest's
// processes, so that a terminal's Ctrl-C reaches only the test process, which stops the seed in order.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
