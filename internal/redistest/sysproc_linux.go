package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test process
// dies without its cleanups (a crash, a timeout's panic, kill -9), so no
// server outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
