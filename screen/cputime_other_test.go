//go:build !unix

package screen

import "time"

func cpuTime() time.Duration { return 0 }
