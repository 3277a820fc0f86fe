// Package storetest checks that an implementation of store.Store keeps the
// contracts package store documents, in the manner of testing/fstest: a
// backend's own tests call Run with a function that opens an empty store,
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			st, err := mybackend.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { st.Close() })
//			return st
//		})
//	}
//
// and every part is exercised through the Store's accessors only:
// principals and their tokens, sign-in links, web sessions, settings, the
// audit log, command proposals, the Flow kernel's store, Runs, the control
// registry's proposals, undo histories and hosted forms, screens, and the
// Run leases and event log that nodes share. Cases that race several writers
// run them in goroutines, so running the suite with -race also checks the
// backend's own synchronization.
//
// Times given to a store carry whole milliseconds: a backend must keep at
// least that precision.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// Run runs the conformance suite, one subtest per part. open must return a
// new, empty store each time it is called, and close it when t ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	parts := []struct {
		name string
		test func(*testing.T, func(*testing.T) store.Store)
	}{
		{"Principals", testPrincipals},
		{"SignInLinks", testSignInLinks},
		{"Sessions", testSessions},
		{"Settings", testSettings},
		{"Audit", testAudit},
		{"Proposals", testProposals},
		{"Flows", testFlows},
		{"FlowDecisions", FlowDecisions},
		{"FlowQuorum", FlowQuorum},
		{"FlowDeadline", FlowDeadline},
		{"FlowDue", FlowDue},
		{"Runs", Runs},
		{"RunRequests", RunRequests},
		{"Controls", testControls},
		{"Screens", testScreens},
		{"Cluster", Cluster},
		{"OAuth", testOAuth},
		{"Notify", testNotify},
		{"Rules", testRules},
		{"Asks", testAsks},
		{"Groups", testGroups},
		{"Deadlines", testDeadlines},
	}
	for _, p := range parts {
		t.Run(p.name, func(t *testing.T) { p.test(t, open) })
	}
}

// epoch is the base of the times the suite stores: whole milliseconds, in
// UTC.
var epoch = time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)

// at returns epoch plus d.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// hash returns a stand-in for the SHA-256 hash of a secret: 32 bytes that
// differ for each name.
func hash(name string) []byte {
	b := make([]byte, 32)
	copy(b, name)
	return b
}

// race calls fn(i) for i in [0, n) from n goroutines released together,
// and returns the errors in order of i.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// exactlyOne checks that one of errs is nil and every other one is want.
func exactlyOne(t *testing.T, what string, errs []error, want error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Errorf("%s: calls %d and %d both succeeded; exactly one may", what, winner, i)
		case !errors.Is(err, want):
			t.Errorf("%s: call %d = %v, want %v", what, i, err, want)
		}
	}
	if winner < 0 {
		t.Errorf("%s: no call succeeded; exactly one must", what)
	}
	return winner
}

// ctx returns the test's context.
func ctx(t *testing.T) context.Context { return t.Context() }
