//go:build unix

package tasks_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) this process used so
// far: a benchmark's cost that other processes on a shared machine do not
// move the way they move its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
