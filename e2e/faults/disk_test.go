package faults

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// fill writes a file into dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Fill what a smaller write still finds.
	for _, err := f.Write(buf[:512]); err == nil; _, err = f.Write(buf[:512]) {
	}
	return path
}

// TestFullDisk serves from a small tmpfs, fills it, and checks that while
// the disk is full every write is answered 201 (then it is saved) or 503
// store_unavailable, never 500; that writes succeed again once space is
// freed; and that every acknowledged write is there after a kill -9. It
// needs root to mount the tmpfs and skips otherwise.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	exe := buildAssent(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	data := filepath.Join(dir, "data")
	s := serve(t, exe, data)
	token := s.token
	// An application's service shows a screen that it updates live.
	app := tokens(t, exe, data, "", "service", 1)[0]
	code, shown, err := s.call("POST", "/v1/screens", app, nil, "root = Text($s)\n$s = \"start\"\n")
	screenID, _ := shown["id"].(string)
	if err != nil || code != http.StatusCreated || screenID == "" {
		t.Fatalf("show: %d %v %v", code, shown, err)
	}
	filler := fill(t, dir)

	l := newLedger()
	writes := 200
	if *long {
		writes = 2000
	}
	for i := range writes {
		id := fmt.Sprintf("full-%d", i)
		code, body, err := s.startInstance(token, id)
		if err != nil {
			t.Fatalf("write %d got no answer: %v", i, err)
		}
		l.note(id, code, body, err)
		if code == http.StatusTooManyRequests {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if code/100 != 2 && (code != http.StatusServiceUnavailable || errCode(body) != "store_unavailable") {
			t.Fatalf("write %d on a full disk: %d %v; want 201 or 503 store_unavailable", i, code, body)
		}
	}
	refusedFull := l.refused["503 store_unavailable"]
	if refusedFull == 0 {
		t.Fatalf("no write was refused on a full disk: %d acknowledged", len(l.acked))
	}
	ready, _, _ := s.call("GET", "/v1/ready", "", nil, nil)

	// Live updates on the full disk: each is answered 200 (saved) or 503
	// store_unavailable, never 500.
	updates := map[string]int{}
	lastAcked := "start"
	for i := range 50 {
		v := fmt.Sprintf("update-%d", i)
		code, body, err := s.call("POST", "/v1/screens/"+screenID+"/updates", app, nil, `$s = "`+v+`"`)
		if err != nil {
			t.Fatalf("update %d got no answer: %v", i, err)
		}
		updates[fmt.Sprintf("%d %s", code, errCode(body))]++
		switch {
		case code == http.StatusOK:
			lastAcked = v
		case code == http.StatusServiceUnavailable && errCode(body) == "store_unavailable":
			if c, ok := dig(body, "error", "data", "committed").(bool); !ok {
				t.Fatalf("a refused update does not say whether it committed: %v", body)
			} else if c {
				lastAcked = v
			}
		case code == http.StatusTooManyRequests:
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("update %d on a full disk: %d %v; want 200 or 503 store_unavailable", i, code, body)
		}
	}

	// Space again: writes are saved again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := 0
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		id := fmt.Sprintf("freed-%d", freed)
		freed++
		code, body, err := s.startInstance(token, id)
		l.note(id, code, body, err)
		if code != http.StatusCreated {
			c.Errorf("writes still fail once the disk has space: %v", l.refused)
		}
	}, "a write saved once the disk has space")
	s.kill()
	s = serve(t, exe, data)
	if _, got, err := s.call("GET", "/v1/screens/"+screenID, app, nil, nil); err != nil || !strings.Contains(fmt.Sprint(got["outline"]), lastAcked) {
		t.Errorf("after the kill the screen shows %v, want the last acknowledged update %q (%v)", got["outline"], lastAcked, err)
	}
	owner := map[string]string{}
	for _, id := range l.acked {
		owner[id] = token
	}
	if lost := missing(t, s, owner, l.acked); len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are missing after the kill, e.g. %v", len(lost), len(l.acked), lost[:min(3, len(lost))])
	}
	t.Logf("full disk: %d writes; %d acknowledged (all present after kill -9 and restart), refused %v; screen updates %v; /v1/ready answered %d while full",
		writes, len(l.acked), l.refused, updates, ready)
}
