package run

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Process identity statuses.
const (
	identityValid       = "valid"
	identityDead        = "dead_pid"
	identityMismatch    = "owner_mismatch"
	identityUnsupported = "unsupported_proof"
	// identityOtherNode: another node supervises the Run; its process
	// lives there and is not checked here.
	identityOtherNode = "other_node"
	// identityStarting: this node claimed the Run's generation and is
	// starting its process, whose pid is not recorded yet.
	identityStarting = "starting"
)

// procStartTime returns the kernel start time of pid (field 22 of
// /proc/<pid>/stat, read after the last ')' so a command name cannot shift
// it) and whether the process is a zombie.
func procStartTime(pid int) (start string, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false, errors.New("malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return "", false, errors.New("malformed /proc stat")
	}
	return string(f[19]), string(f[0]) == "Z", nil
}

// verifyProcess compares the live process pid with the recorded start
// time, so a pid the kernel has reused is never taken for the Run.
func verifyProcess(pid int, start string) string {
	if pid <= 0 {
		return identityDead
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return identityDead
	}
	got, zombie, err := procStartTime(pid)
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return identityUnsupported
		}
		return identityDead
	}
	if zombie {
		return identityDead
	}
	if start == "" {
		return identityUnsupported
	}
	if got != start {
		return identityMismatch
	}
	return identityValid
}
