package run

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Linux flags the syscall package does not name.
const (
	oPath       = 0x200000 // O_PATH
	atEmptyPath = 0x1000   // AT_EMPTY_PATH
)

// rangedUIDsSupported reports whether this system can give each Run its
// own uid: it needs /proc to see which uids own processes.
const rangedUIDsSupported = true

// openRunFile opens path, a file inside the Run directory dir, for
// reading. No component from dir down is followed if it is a symbolic
// link, the open does not block (a FIFO planted in its place cannot hold
// the caller), and the file must be a regular file with a single link; a
// symbolic link, FIFO, device, directory or hard link answers
// errRunFileUnsafe. The checks are made on the opened file, so a Run
// cannot swap the file between check and read.
func openRunFile(dir, path string) (*os.File, os.FileInfo, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, nil, errRunFileUnsafe
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, runFileError(dir, err)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, part := range parts {
		flags := syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= syscall.O_DIRECTORY
		} else {
			flags |= syscall.O_NONBLOCK | syscall.O_NOCTTY
		}
		next, err := syscall.Openat(fd, part, flags, 0)
		syscall.Close(fd)
		if err != nil {
			return nil, nil, runFileError(path, err)
		}
		fd = next
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !singleRegular(fi) {
		f.Close()
		return nil, nil, errRunFileUnsafe
	}
	return f, fi, nil
}

// runFileError maps the error of an open that refuses symbolic links.
func runFileError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENXIO):
		return errRunFileUnsafe
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}

// chownTree gives dir and every entry below it that keep accepts to
// uid:gid, and makes dir 0700 first, so that from then on only uid (and
// root) can reach inside. It never follows a symbolic link (links keep
// their owner), works from open directory descriptors so a concurrent
// rename cannot redirect it outside dir, and checks every entry on the
// descriptor it changes.
func chownTree(dir string, uid, gid int, keep func(*syscall.Stat_t) bool) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := syscall.Fchown(fd, uid, gid); err != nil {
		syscall.Close(fd)
		return &os.PathError{Op: "chown", Path: dir, Err: err}
	}
	if err := syscall.Fchmod(fd, 0o700); err != nil {
		syscall.Close(fd)
		return &os.PathError{Op: "chmod", Path: dir, Err: err}
	}
	return chownBelow(fd, dir, uid, gid, keep, 0)
}

// maxTreeDepth bounds how deep chownTree descends.
const maxTreeDepth = 1024

// chownBelow is chownTree for the entries of the directory open as fd,
// which it closes.
func chownBelow(fd int, path string, uid, gid int, keep func(*syscall.Stat_t) bool, depth int) error {
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	if depth >= maxTreeDepth {
		return fmt.Errorf("%s: more than %d directories deep", path, maxTreeDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := filepath.Join(path, name)
		efd, err := syscall.Openat(fd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(efd, &st); err != nil {
			syscall.Close(efd)
			return &os.PathError{Op: "stat", Path: p, Err: err}
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			syscall.Close(efd)
		case syscall.S_IFDIR:
			syscall.Close(efd)
			dfd, err := syscall.Openat(fd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			if err != nil {
				if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
					continue // replaced meanwhile: not a directory of this tree any more
				}
				return &os.PathError{Op: "open", Path: p, Err: err}
			}
			var dst syscall.Stat_t
			if err := syscall.Fstat(dfd, &dst); err != nil {
				syscall.Close(dfd)
				return &os.PathError{Op: "stat", Path: p, Err: err}
			}
			if keep(&dst) {
				if err := syscall.Fchown(dfd, uid, gid); err != nil {
					syscall.Close(dfd)
					return &os.PathError{Op: "chown", Path: p, Err: err}
				}
			}
			if err := chownBelow(dfd, p, uid, gid, keep, depth+1); err != nil {
				return err
			}
		default:
			if keep(&st) {
				err = syscall.Fchownat(efd, "", uid, gid, atEmptyPath)
			}
			syscall.Close(efd)
			if err != nil {
				return &os.PathError{Op: "chown", Path: p, Err: err}
			}
		}
	}
	return nil
}

// busyIDs returns every uid and gid (real, effective, saved and
// filesystem) of the processes in /proc.
func busyIDs() (map[uint32]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	busy := map[uint32]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		uids, gids, err := procIDs(e.Name())
		if err != nil {
			continue // gone meanwhile
		}
		for _, id := range append(uids, gids...) {
			busy[id] = true
		}
	}
	return busy, nil
}

// procIDs returns the uids and gids of process pid from its status file.
func procIDs(pid string) (uids, gids []uint32, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "Uid" && key != "Gid" {
			continue
		}
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				continue
			}
			if key == "Uid" {
				uids = append(uids, uint32(n))
			} else {
				gids = append(gids, uint32(n))
			}
		}
	}
	if len(uids) == 0 {
		return nil, nil, errors.New("no Uid line")
	}
	return uids, gids, nil
}

// processUID returns the real uid of process pid.
func processUID(pid int) (uint32, bool) {
	uids, _, err := procIDs(strconv.Itoa(pid))
	if err != nil {
		return 0, false
	}
	return uids[0], true
}

// idsMapped reports whether every id from first to last is mapped in
// this process's user namespace, by the map file (/proc/self/uid_map or
// gid_map). Without the file (no user namespaces) every id is.
func idsMapped(mapFile string, first, last uint32) bool {
	b, err := os.ReadFile(mapFile)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	type span struct{ lo, hi uint64 }
	var spans []span
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil {
			continue
		}
		spans = append(spans, span{inside, inside + count})
	}
	for cur := uint64(first); cur <= uint64(last); {
		next := cur
		for _, s := range spans {
			if s.lo <= cur && cur < s.hi {
				next = s.hi
				break
			}
		}
		if next == cur {
			return false
		}
		cur = next
	}
	return true
}
