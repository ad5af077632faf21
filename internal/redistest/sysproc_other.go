//go:build !linux

package redistest

import "syscall"

// sysProcAttr is empty where the kernel cannot tie the child's life to the
// test process: the cleanups of Start still kill it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
