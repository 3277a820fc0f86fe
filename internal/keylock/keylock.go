// Package keylock gives a lock per key: one holder at a time for each key,
// any number of keys held at once. A key's lock exists only while someone
// holds or waits for it, so the memory it takes follows the keys in use
// rather than every key ever locked.
package keylock

import (
	"context"
	"sync"
)

// Map holds the locks of its keys. The zero Map is ready to use; a Map
// must not be copied after first use.
type Map struct {
	mu sync.Mutex
	m  map[string]*entry
}

// entry is the lock of one key: a token in sem while it is held.
type entry struct {
	sem chan struct{}
	// refs counts those holding or waiting for sem; it changes only with
	// Map.mu held.
	refs int
}

// Lock waits until nobody else holds key's lock, takes it, and returns the
// function that releases it. It returns ctx's error, holding nothing, when
// ctx ends first.
func (l *Map) Lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	e := l.m[key]
	if e == nil {
		if l.m == nil {
			l.m = make(map[string]*entry)
		}
		e = &entry{sem: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.sem <- struct{}{}:
		return func() {
			<-e.sem
			l.leave(key, e)
		}, nil
	case <-ctx.Done():
		l.leave(key, e)
		return nil, ctx.Err()
	}
}

// leave drops one holder or waiter of key's lock e, forgetting the lock
// when nobody is left.
func (l *Map) leave(key string, e *entry) {
	l.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(l.m, key)
	}
	l.mu.Unlock()
}

// Waiting reports how many hold or wait for key's lock.
func (l *Map) Waiting(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil {
		return e.refs
	}
	return 0
}

// Len reports how many keys have a lock someone holds or waits for.
func (l *Map) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
