package run

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The network a Run and tool process sees.
//
// With NetworkIsolated (the default) each starts in a network namespace of
// its own in which only the loopback interface is up: no port of the
// machine (the server's listener, a database, other services) and no
// other host is reachable from it. Its one way back to the server is the
// run API: the server serves its HTTP handler on a Unix socket in the data
// directory (runAPIDir), and a Run's init listens on 127.0.0.1:RunAPIPort
// inside the namespace and passes each connection to that socket. A Run's
// ASSENT_URL names that loopback address; its run-scoped token decides
// what it may do there, as on the server's own listener.
//
// With NetworkHost Runs share the server's network namespace, as programs
// that need the network (a package download, a remote API) require, and
// ASSENT_URL is the server's base URL.
const (
	NetworkIsolated = "isolated"
	NetworkHost     = "host"
)

// RunAPIPort is the loopback port on which a Run with a network of its own
// reaches the server: its ASSENT_URL is http://127.0.0.1:RunAPIPort.
const RunAPIPort = 7410

// runAPIDir is the directory of the data directory that holds the run
// API's socket, runAPISocket. The directory outlives the server, so a Run
// that outlives a restart still finds the socket of the next server in it.
const (
	runAPIDir    = "run-api"
	runAPISocket = "server.sock"
)

// checkNetwork validates Config.Network.
func checkNetwork(mode string) error {
	switch mode {
	case "", NetworkIsolated, NetworkHost:
		return nil
	}
	return errorf(CodeInvalidRequest, "run network %q: use %q (each Run in a network of its own, reaching only the server) or %q (Runs share the server's network)", mode, NetworkIsolated, NetworkHost)
}

// runAPI is the Unix socket on which the server serves Runs that have a
// network of their own.
type runAPI struct {
	// dir is the directory holding the socket, path the socket.
	dir, path string
	ln        *net.UnixListener
	// made is the socket as created, so that close removes it only
	// while no later server replaced it.
	made os.FileInfo
	srv  *http.Server
	// served is closed when the serving goroutine ends; nil before Serve.
	served chan struct{}
}

// listenRunAPI creates the run API's socket in dataDir, replacing one a
// previous server left there. The directory is searchable and the socket
// writable by every user, so that a Run's init, which runs as the Run's
// own user, can connect: what a connection may do is decided by its token,
// as on the server's TCP listener.
func listenRunAPI(dataDir string) (*runAPI, error) {
	dir := filepath.Join(dataDir, runAPIDir)
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, runAPISocket)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s is not a socket: remove it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	addr, release, err := socketAddr(dir, runAPISocket)
	if err != nil {
		return nil, err
	}
	defer release()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The socket is removed by its real path on close (see close).
	ln.SetUnlinkOnClose(false)
	made, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	return &runAPI{dir: dir, path: path, ln: ln, made: made}, nil
}

// serve serves h on the socket until close.
func (a *runAPI) serve(h http.Handler, log *slog.Logger) {
	if a.served != nil {
		return
	}
	a.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	a.served = make(chan struct{})
	go func() {
		defer close(a.served)
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the run API stopped serving: Runs with a network of their own cannot reach the server", "err", err)
		}
	}()
}

// close stops serving, ends every connection and removes the socket,
// unless another server replaced it meanwhile.
func (a *runAPI) close() {
	if a.served != nil {
		a.srv.Close()
		<-a.served
	} else {
		a.ln.Close()
	}
	if fi, err := os.Lstat(a.path); err == nil && os.SameFile(fi, a.made) {
		os.Remove(a.path)
	}
}

// ServeRunAPI serves h, the server's HTTP handler, to Runs that have a
// network of their own, until Close. It does nothing when they share the
// server's network (NetworkHost, or no namespaces here) or when it was
// called before.
func (m *Manager) ServeRunAPI(h http.Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.api == nil || m.closed {
		return
	}
	m.api.serve(h, m.log)
}

// RunNetwork reports the network Runs and tool processes get: NetworkIsolated
// when each has a network namespace of its own, NetworkHost when they share
// the server's.
func (m *Manager) RunNetwork() string {
	if m.iso != nil && m.iso.netns {
		return NetworkIsolated
	}
	return NetworkHost
}

// runURL is the ASSENT_URL of a Run.
func (m *Manager) runURL() string {
	if m.iso != nil && m.iso.netns {
		return "http://127.0.0.1:" + strconv.Itoa(RunAPIPort)
	}
	return m.cfg.URL
}

// initNet is the network argument of a Run's init: "-" to keep the
// server's network; "lo" for a network of its own with loopback only;
// "lo:PORT:DIR" to also forward 127.0.0.1:PORT to the run API's socket in
// DIR.
func (m *Manager) initNet(forward bool) string {
	switch {
	case m.iso == nil || !m.iso.netns:
		return "-"
	case forward && m.api != nil:
		return "lo:" + strconv.Itoa(RunAPIPort) + ":" + m.api.dir
	}
	return "lo"
}
