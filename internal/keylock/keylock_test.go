package keylock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

func TestOneHolderPerKey(t *testing.T) {
	var l Map
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Another key is free while a is held.
	unlockB, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	// A second holder of a waits until a is released.
	got := make(chan struct{})
	go func() {
		unlock, err := l.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
			return
		}
		close(got)
		unlock()
	}()
	testwait.Eventually(t, 10*time.Second, func() bool {
		select {
		case <-got:
			t.Fatal("a second holder took a while it was held")
		default:
		}
		return l.Waiting("a") == 2
	}, "the second holder waiting for a")
	unlockA()
	<-got
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if n := l.Len(); n != 0 {
			c.Errorf("%d keys kept after every lock was released, want 0", n)
		}
	}, "every key dropped")
}

func TestLockEndsWithContext(t *testing.T) {
	var l Map
	unlock, err := l.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held key with an ending context = %v, want the context's error", err)
	}
	if n := l.Waiting("a"); n != 1 {
		t.Errorf("%d hold or wait for a after the waiter gave up, want 1", n)
	}
	unlock()
	if n := l.Len(); n != 0 {
		t.Errorf("%d keys kept after every lock was released, want 0", n)
	}
}

// TestExclusion counts, for each key, how many hold it at once, with many
// goroutines locking a few keys.
func TestExclusion(t *testing.T) {
	var (
		l    Map
		mu   sync.Mutex
		held = map[string]int{}
		wg   sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprint((w + i) % 3)
				unlock, err := l.Lock(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				held[key]++
				if held[key] > 1 {
					t.Errorf("key %s held %d times at once", key, held[key])
				}
				mu.Unlock()
				mu.Lock()
				held[key]--
				mu.Unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	if n := l.Len(); n != 0 {
		t.Errorf("%d keys kept after every lock was released, want 0", n)
	}
}
