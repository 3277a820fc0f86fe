//go:build unix

package control

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used, so
// benchmarks can report throughput per CPU-second, which other load on a
// shared machine does not distort the way it distorts wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
