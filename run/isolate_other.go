//go:build !linux

package run

import (
	"errors"
	"os/exec"
	"path/filepath"
)

// Init does nothing where Runs cannot get namespaces of their own.
func Init() {}

// isolation is unused where Runs cannot get namespaces of their own.
type isolation struct{ userNS, netns bool }

func (iso *isolation) isolate(cmd *exec.Cmd, id *identity, dataDir, dir, network, name string, args []string) {
}

// noNewPrivsWhy says why startPlain cannot serve.
const noNewPrivsWhy = "no_new_privs needs Linux"

// startPlain reports false: no_new_privs is a Linux setting.
func startPlain(cmd *exec.Cmd, id *identity) bool { return false }

func probeIsolation(dataDir, dir string, netns bool) (*isolation, string, error) {
	return nil, "", errors.New("PID and mount namespaces need Linux")
}

// socketAddr returns the path of the socket name in dir.
func socketAddr(dir, name string) (string, func(), error) {
	return filepath.Join(dir, name), func() {}, nil
}
