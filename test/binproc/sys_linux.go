package binproc

import "syscall"

// sysProcAttr puts a child in its own process group, so that a terminal's Ctrl-C reaches only the parent, which stops
// the children in order, and gives it a parent-death signal, so that it dies with the parent even when the parent is
// killed. The signal is tied to the thread that started the child; Go keeps threads of goroutines that are not locked
// to a thread alive, and the harness locks none.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
