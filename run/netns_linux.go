package run

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// socketAddr returns the address at which to bind the socket name in dir:
// its path, or, when that is longer than a socket address may be, a path
// through an open descriptor of dir, valid until release.
func socketAddr(dir, name string) (addr string, release func(), err error) {
	path := filepath.Join(dir, name)
	if len(path) <= 100 {
		return path, func() {}, nil
	}
	fd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &net.OpError{Op: "listen", Net: "unix", Err: err}
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name, func() { syscall.Close(fd) }, nil
}

// runNet is what a Run's init does about the network, from its network
// argument (see Manager.initNet).
type runNet struct {
	// own: the init is in a network namespace of its own.
	own bool
	// port and dir: forward 127.0.0.1:port to the run API's socket in dir.
	port int
	dir  string
}

// parseRunNet parses the network argument of a Run's init.
func parseRunNet(arg string) (runNet, error) {
	switch {
	case arg == "-":
		return runNet{}, nil
	case arg == "lo":
		return runNet{own: true}, nil
	}
	rest, ok := strings.CutPrefix(arg, "lo:")
	portText, dir, ok2 := strings.Cut(rest, ":")
	port, err := strconv.Atoi(portText)
	if !ok || !ok2 || err != nil || port <= 0 || port > 65535 || !filepath.IsAbs(dir) {
		return runNet{}, fmt.Errorf("bad network argument %q", arg)
	}
	return runNet{own: true, port: port, dir: dir}, nil
}

// ifreqSize is the size of struct ifreq; its flags (a short) follow the
// 16-byte interface name.
const ifreqSize = 40

// loopbackUp brings up the loopback interface of this network namespace,
// which starts down.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	defer syscall.Close(fd)
	var req [ifreqSize]byte
	copy(req[:], "lo")
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
		return fmt.Errorf("bring up loopback: %w", errno)
	}
	flags := binary.NativeEndian.Uint16(req[16:]) | syscall.IFF_UP
	binary.NativeEndian.PutUint16(req[16:], flags)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
		return fmt.Errorf("bring up loopback: %w", errno)
	}
	return nil
}

// forwarder passes each connection to a loopback port of a Run's network
// namespace on to the run API's socket, which it reaches by path: Unix
// sockets are found through the file system, not the network namespace.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	// ctx ends, with close, a connection to the target under way.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// listenForward listens on 127.0.0.1:port and will pass connections to
// target once started.
func listenForward(port int, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen for the run API: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &forwarder{ln: ln, target: target, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}, nil
}

// start accepts connections until close.
func (f *forwarder) start() {
	f.wg.Go(func() {
		for {
			c, err := f.ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if !f.track(c) {
				c.Close()
				return
			}
			f.wg.Go(func() {
				defer f.untrack(c)
				f.pass(c)
			})
		}
	})
}

// track records c as open; false once the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// pass copies c to a new connection to the target and back, until both
// sides ended.
func (f *forwarder) pass(c net.Conn) {
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(f.ctx, "unix", f.target)
	if err != nil {
		return
	}
	if !f.track(up) {
		up.Close()
		return
	}
	defer f.untrack(up)
	defer up.Close()
	var sent sync.WaitGroup
	sent.Go(func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.UnixConn).CloseWrite()
	})
	_, _ = io.Copy(c, up)
	_ = c.(*net.TCPConn).CloseWrite()
	sent.Wait()
}

// close stops accepting, ends every connection and waits for the
// forwarder's goroutines.
func (f *forwarder) close() {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
