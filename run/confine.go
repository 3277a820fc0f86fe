package run

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A Run process owns its Run directory, so every file in it may be a
// symbolic link, a FIFO or a hard link it planted. The server reads such
// files only through openRunFile, and changes their owners only through
// chownTree; both refuse to follow links.

// errRunFileUnsafe is the answer for a file in a Run directory that is not
// a regular file with a single link: a symbolic link, FIFO, device,
// directory or hard link the Run put in its place. Views read it as
// missing or empty.
var errRunFileUnsafe = errors.New("not a regular file with a single link")

// singleRegular reports whether fi is a regular file with one link.
func singleRegular(fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || uint64(st.Nlink) == 1
}

// readRunFile returns at most limit bytes from the start of path, a file
// inside the Run directory dir (see openRunFile).
func readRunFile(dir, path string, limit int64) ([]byte, error) {
	f, _, err := openRunFile(dir, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// statRunFile returns what openRunFile finds at path, inside dir, and
// whether it is a file the views may show.
func statRunFile(dir, path string) (os.FileInfo, bool) {
	f, fi, err := openRunFile(dir, path)
	if err != nil {
		return nil, false
	}
	f.Close()
	return fi, true
}

// DefaultRunUIDs is the range of uids Run and tool processes get, each its
// own, when the server runs as root and no run user is set. It lies above
// the ids login.defs hands to users (UID_MAX 60000) and subordinate ids
// (SUB_UID_MIN 100000, 65536 per user), above systemd's container range
// (524288-1879048191) and below 2^31, so no tool reads it as negative.
const DefaultRunUIDs = "2000000000-2000999999"

// maxRunUID is the highest uid a range may hold: above it, some programs
// take a uid for a negative number.
const maxRunUID = 1<<31 - 1

// ParseRunUIDs parses a uid range "FIRST-LAST" for Run processes. FIRST
// must be at least 1000 (below it are system users) and LAST at most
// 2147483647.
func ParseRunUIDs(s string) (first, last uint32, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	lo, err1 := strconv.ParseUint(a, 10, 32)
	hi, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, errorf(CodeInvalidRequest, "run uid range %q: write FIRST-LAST, for example %s", s, DefaultRunUIDs)
	}
	if lo < 1000 || hi < lo || hi > maxRunUID {
		return 0, 0, errorf(CodeInvalidRequest, "run uid range %q: need 1000 <= FIRST <= LAST <= %d, for example %s", s, maxRunUID, DefaultRunUIDs)
	}
	return uint32(lo), uint32(hi), nil
}

// uidPool hands out the uids of a range, one to each Run generation and
// tool process. A uid is never given while another holder has it, while
// any process on the machine runs with it as a uid or gid (so several
// servers on one machine, or processes a Run left behind, keep theirs),
// or while a passwd or group entry names it.
type uidPool struct {
	first, last uint32
	reserved    map[uint32]bool

	mu   sync.Mutex
	held map[uint32]bool
}

func newUIDPool(first, last uint32) *uidPool {
	p := &uidPool{first: first, last: last, reserved: map[uint32]bool{65534: true, 65535: true}, held: map[uint32]bool{}}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, id := range idsInDatabase(f) {
			if p.contains(id) {
				p.reserved[id] = true
			}
		}
	}
	return p
}

// idsInDatabase returns the numeric ids (third field) of a passwd or group
// file.
func idsInDatabase(path string) []uint32 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ids []uint32
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if n, err := strconv.ParseUint(fields[2], 10, 32); err == nil {
			ids = append(ids, uint32(n))
		}
	}
	return ids
}

func (p *uidPool) contains(id uint32) bool { return id >= p.first && id <= p.last }

// take returns a free uid, starting the search at a random place so that
// a uid is rarely given again soon.
func (p *uidPool) take() (uint32, error) {
	busy, err := busyIDs()
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := uint64(p.last-p.first) + 1
	start := rand.Uint64N(n)
	for i := range n {
		id := p.first + uint32((start+i)%n)
		if !p.held[id] && !p.reserved[id] && !busy[id] {
			p.held[id] = true
			return id, nil
		}
	}
	return 0, fmt.Errorf("every uid of %d-%d is in use", p.first, p.last)
}

// hold marks id as held (a process adopted at start keeps its uid).
func (p *uidPool) hold(id uint32) {
	if !p.contains(id) {
		return
	}
	p.mu.Lock()
	p.held[id] = true
	p.mu.Unlock()
}

func (p *uidPool) release(id uint32) {
	p.mu.Lock()
	delete(p.held, id)
	p.mu.Unlock()
}

// identity is the user a sandboxed process runs as.
type identity struct {
	uid, gid uint32
	// pooled: uid came from the Manager's pool and goes back to it.
	pooled bool
}

// takeIdentity returns the user the next Run generation or tool process
// runs as: its own uid (and gid) from the range, or the shared run user;
// nil when processes keep the server's user. Give it back with retire, or
// with releaseIdentity once its directory was taken back.
func (m *Manager) takeIdentity() (*identity, error) {
	switch {
	case m.runAs == nil:
		return nil, nil
	case m.uids == nil:
		return &identity{uid: m.runAs.uid, gid: m.runAs.gid}, nil
	}
	id, err := m.uids.take()
	if err != nil {
		return nil, errorf(CodeSandbox, "no uid is free for a new process: %v. Wait for Runs to end, or give the server a larger --run-uids range.", err)
	}
	return &identity{uid: id, gid: id, pooled: true}, nil
}

// releaseIdentity gives id's uid back to the pool. Call it only once
// nothing of id's can be reached any more (see reclaim).
func (m *Manager) releaseIdentity(id *identity) {
	if id != nil && id.pooled {
		m.uids.release(id.uid)
	}
}

// retire takes dir back from id (see reclaim) and then gives id back.
// Should dir not be taken back, id's uid stays held, so that no other
// process is given a uid that can still reach dir.
func (m *Manager) retire(dir string, id *identity) {
	if err := m.reclaim(dir); err != nil {
		m.log.Warn("take back a directory from its run user; its uid stays reserved", "dir", dir, "err", err)
		return
	}
	m.releaseIdentity(id)
}

// handOverTree gives the directory dir and what is in it to id, so its
// process may use and change what earlier generations left; dir becomes
// 0700. A file with several links is never given: it might be a link to a
// file outside dir. A no-op when processes keep the server's user.
func (m *Manager) handOverTree(dir string, id *identity) error {
	if id == nil {
		return nil
	}
	return chownTree(dir, int(id.uid), int(id.gid), func(st *syscall.Stat_t) bool {
		return st.Mode&syscall.S_IFMT == syscall.S_IFDIR || uint64(st.Nlink) == 1
	})
}

// reclaim takes the directory dir and what is in it back from the users
// Runs run as, to the server's own user, so that nobody given the same
// uid later can reach it; dir becomes 0700. It changes entries with one
// link, directories, and files with several links that a run user owns,
// never anything through a symbolic link. A no-op when processes keep the
// server's user.
func (m *Manager) reclaim(dir string) error {
	if m.runAs == nil {
		return nil
	}
	err := chownTree(dir, os.Geteuid(), os.Getegid(), func(st *syscall.Stat_t) bool {
		return st.Mode&syscall.S_IFMT == syscall.S_IFDIR || uint64(st.Nlink) == 1 || m.isRunUID(st.Uid)
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// isRunUID reports whether uid is one Run processes run as.
func (m *Manager) isRunUID(uid uint32) bool {
	if m.uids != nil {
		return m.uids.contains(uid)
	}
	return m.runAs != nil && uid == m.runAs.uid
}
