package screens

import (
	"fmt"
	"testing"
	"time"
)

func TestIdemCacheBoundsAndExpiry(t *testing.T) {
	now := time.Unix(0, 0)
	c := newIdemCache(3, time.Hour)
	var fp [32]byte
	for i := range 5 {
		e, st := c.begin(fmt.Sprint("k", i), fp, now)
		if st != idemNew {
			t.Fatalf("key %d: state %v", i, st)
		}
		c.finish(e, 200, nil, true)
	}
	if len(c.byKey) != 3 {
		t.Fatalf("cache holds %d keys, want 3", len(c.byKey))
	}
	if _, st := c.begin("k0", fp, now); st != idemNew {
		t.Fatal("the oldest key was not forgotten")
	}
	if _, st := c.begin("k4", fp, now); st != idemReplay {
		t.Fatal("a recent key was forgotten")
	}
	if _, st := c.begin("k4", fp, now.Add(time.Hour)); st != idemNew {
		t.Fatal("an expired key was replayed")
	}
	e, _ := c.begin("busy", fp, now)
	if _, st := c.begin("busy", fp, now); st != idemInProgress {
		t.Fatal("a running key was not reported in progress")
	}
	c.finish(e, 500, nil, false)
	if _, st := c.begin("busy", fp, now); st != idemNew {
		t.Fatal("a failed answer was kept")
	}
}
