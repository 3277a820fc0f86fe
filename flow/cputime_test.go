//go:build unix

package flow

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, which, unlike wall
// time, is not inflated when other processes compete for the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
