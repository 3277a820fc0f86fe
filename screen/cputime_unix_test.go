//go:build unix

package screen

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user and system CPU time, so benchmarks can
// report the work done independently of other load on the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
