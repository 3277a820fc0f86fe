//go:build !linux

package run

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// rangedUIDsSupported reports whether this system can give each Run its
// own uid; that needs Linux's /proc.
const rangedUIDsSupported = false

// openRunFile opens path, a file inside the Run directory dir, for
// reading: through an os.Root at dir (no escape through a symbolic link),
// refusing a final symbolic link, without blocking, and only a regular
// file with a single link (errRunFileUnsafe otherwise).
func openRunFile(dir, path string) (*os.File, os.FileInfo, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, nil, errRunFileUnsafe
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	if fi, err := root.Lstat(rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		return nil, nil, errRunFileUnsafe
	} else if !fi.Mode().IsRegular() {
		return nil, nil, errRunFileUnsafe
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, errRunFileUnsafe
	}
	fi, err := f.Stat()
	if err != nil || !singleRegular(fi) {
		f.Close()
		return nil, nil, errRunFileUnsafe
	}
	return f, fi, nil
}

// chownTree gives dir and every entry below it that keep accepts to
// uid:gid, without following symbolic links, and makes dir 0700 first.
func chownTree(dir string, uid, gid int, keep func(*syscall.Stat_t) bool) error {
	if err := os.Lchown(dir, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || fi.Mode()&fs.ModeSymlink != 0 || !keep(st) {
			return nil
		}
		return root.Lchown(p, uid, gid)
	})
}

// busyIDs is empty where /proc is not available.
func busyIDs() (map[uint32]bool, error) { return map[uint32]bool{}, nil }

// processUID is unknown where /proc is not available.
func processUID(int) (uint32, bool) { return 0, false }

// idsMapped: there are no user namespaces to map ids.
func idsMapped(string, uint32, uint32) bool { return true }
