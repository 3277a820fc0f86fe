package run

import (
	"errors"
	"sync"
)

// group commits concurrent writes together. A caller that finds no commit
// in progress leads: it writes everything queued (up to maxGroup items) in
// one call of run, hands the lead to the first caller still waiting, and
// returns. The others wait for their result or for the lead. Bounds still
// hold exactly, because the store checks them per item inside the
// transaction.
type group[T any] struct {
	run func(items []T) ([]error, error)

	mu      sync.Mutex
	busy    bool
	pending []groupItem[T]
}

type groupItem[T any] struct {
	v    T
	done chan error // buffered: the lead, then the result
}

const maxGroup = 256

// errLead tells a waiting caller that it now leads.
var errLead = errors.New("lead")

func (g *group[T]) do(v T) error {
	it := groupItem[T]{v: v, done: make(chan error, 2)}
	g.mu.Lock()
	g.pending = append(g.pending, it)
	if g.busy {
		g.mu.Unlock()
		if err := <-it.done; err != errLead {
			return err
		}
		g.mu.Lock()
	}
	g.busy = true
	batch := g.pending
	if len(batch) > maxGroup {
		batch = batch[:maxGroup]
	}
	g.pending = g.pending[len(batch):]
	g.mu.Unlock()

	items := make([]T, len(batch))
	for i, b := range batch {
		items[i] = b.v
	}
	errs, err := g.run(items)
	for i, b := range batch {
		if err != nil {
			b.done <- err
		} else {
			b.done <- errs[i]
		}
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- errLead
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return <-it.done
}
