package run

import (
	"errors"
	"sync"
	"testing"
)

func TestGroupDeliversEveryResult(t *testing.T) {
	var mu sync.Mutex
	var batches, total int
	g := &group[int]{run: func(items []int) ([]error, error) {
		mu.Lock()
		batches++
		total += len(items)
		mu.Unlock()
		errs := make([]error, len(items))
		for i, v := range items {
			if v%7 == 0 {
				errs[i] = errors.New("seven")
			}
		}
		return errs, nil
	}}
	var wg sync.WaitGroup
	var failed sync.Map
	for i := 1; i <= 500; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.do(i); err != nil {
				failed.Store(i, true)
			}
		}()
	}
	wg.Wait()
	if total != 500 {
		t.Fatalf("ran %d items", total)
	}
	for i := 1; i <= 500; i++ {
		_, bad := failed.Load(i)
		if bad != (i%7 == 0) {
			t.Fatalf("item %d: failed=%v", i, bad)
		}
	}
	if g.busy || len(g.pending) != 0 {
		t.Fatal("group left busy")
	}
	// A failed batch fails every item in it.
	g = &group[int]{run: func(items []int) ([]error, error) { return nil, errors.New("down") }}
	if err := g.do(1); err == nil || err.Error() != "down" {
		t.Fatalf("batch error: %v", err)
	}
}
