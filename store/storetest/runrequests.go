package storetest

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

// RunRequests checks a backend's store.RunRequests: adding, answering
// once, the bound on an answer, the pending list of a node, and deletion.
// Run calls it.
func RunRequests(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		test func(*testing.T, store.Runs)
	}{
		{"AddAndRead", testRunRequestAdd},
		{"Invalid", testRunRequestInvalid},
		{"AnswerOnce", testRunRequestAnswerOnce},
		{"AnswerBound", testRunRequestAnswerBound},
		{"Pending", testRunRequestPending},
		{"Delete", testRunRequestDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t).Runs()) })
	}
}

func logsRequest(id, node string, d time.Duration) store.RunRequest {
	return store.RunRequest{ID: id, RunID: "r1", InstanceID: "r1-1", Node: node, Kind: store.RunRequestLogs,
		Stream: "stdout", Lines: 20, RequestedAt: at(d)}
}

func testRunRequestAdd(t *testing.T, s store.Runs) {
	want := logsRequest("q1", "node-a", 0)
	if err := s.AddRunRequest(ctx(t), want); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRunRequest(ctx(t), want); !errors.Is(err, store.ErrConflict) {
		t.Errorf("adding id q1 again: %v; want ErrConflict", err)
	}
	got, err := s.RunRequest(ctx(t), "q1")
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != want.RunID || got.InstanceID != want.InstanceID || got.Node != want.Node || got.Kind != want.Kind ||
		got.Stream != want.Stream || got.Lines != want.Lines || !got.RequestedAt.Equal(want.RequestedAt) || got.Answered() {
		t.Errorf("RunRequest(q1) = %+v; want %+v, unanswered", got, want)
	}
	if _, err := s.RunRequest(ctx(t), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunRequest(nope): %v; want ErrNotFound", err)
	}
}

func testRunRequestInvalid(t *testing.T, s store.Runs) {
	for _, tc := range []struct {
		name string
		mod  func(*store.RunRequest)
	}{
		{"no id", func(r *store.RunRequest) { r.ID = "" }},
		{"no run", func(r *store.RunRequest) { r.RunID = "" }},
		{"no node", func(r *store.RunRequest) { r.Node = "" }},
		{"unknown kind", func(r *store.RunRequest) { r.Kind = "restart" }},
		{"logs without stream", func(r *store.RunRequest) { r.Stream = "" }},
		{"no time", func(r *store.RunRequest) { r.RequestedAt = time.Time{} }},
	} {
		r := logsRequest("bad", "node-a", 0)
		tc.mod(&r)
		if err := s.AddRunRequest(ctx(t), r); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: AddRunRequest: %v; want ErrInvalid", tc.name, err)
		}
	}
	kill := store.RunRequest{ID: "k", RunID: "r1", Node: "node-a", Kind: store.RunRequestKill, RequestedAt: at(0)}
	if err := s.AddRunRequest(ctx(t), kill); err != nil {
		t.Errorf("a kill request needs no stream: %v", err)
	}
}

func testRunRequestAnswerOnce(t *testing.T, s store.Runs) {
	if err := s.AddRunRequest(ctx(t), logsRequest("q1", "node-a", 0)); err != nil {
		t.Fatal(err)
	}
	// Two nodes answering at once: exactly one answer is kept.
	var won atomic.Int32
	errs := race(2, func(i int) error {
		err := s.AnswerRunRequest(ctx(t), "q1", strings.Repeat("x", i+1), "", at(time.Second))
		if err == nil {
			won.Add(1)
		}
		return err
	})
	if won.Load() != 1 {
		t.Fatalf("two answers to one request: %v; want exactly one to succeed", errs)
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, store.ErrConflict) {
			t.Errorf("the losing answer: %v; want ErrConflict", err)
		}
	}
	got, err := s.RunRequest(ctx(t), "q1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Answered() || !got.AnsweredAt.Equal(at(time.Second)) || (got.Text != "x" && got.Text != "xx") {
		t.Errorf("answered request = %+v", got)
	}
	if err := s.AnswerRunRequest(ctx(t), "nope", "", "", at(0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("answering an unknown request: %v; want ErrNotFound", err)
	}
}

func testRunRequestAnswerBound(t *testing.T, s store.Runs) {
	if err := s.AddRunRequest(ctx(t), logsRequest("q1", "node-a", 0)); err != nil {
		t.Fatal(err)
	}
	over := strings.Repeat("a", store.RunRequestTextMaxBytes+1)
	if err := s.AnswerRunRequest(ctx(t), "q1", over, "", at(1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an answer over the bound: %v; want ErrInvalid", err)
	}
	if err := s.AnswerRunRequest(ctx(t), "q1", "", strings.Repeat("e", store.ControlErrorMaxBytes+1), at(1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an error over the bound: %v; want ErrInvalid", err)
	}
	full := strings.Repeat("a", store.RunRequestTextMaxBytes)
	if err := s.AnswerRunRequest(ctx(t), "q1", full, "", at(1)); err != nil {
		t.Fatalf("an answer at the bound: %v", err)
	}
	if got, err := s.RunRequest(ctx(t), "q1"); err != nil || got.Text != full {
		t.Errorf("answer at the bound read back with %d bytes, %v", len(got.Text), err)
	}
}

func testRunRequestPending(t *testing.T, s store.Runs) {
	for i, r := range []store.RunRequest{
		logsRequest("q2", "node-a", 2*time.Second),
		logsRequest("q1", "node-a", time.Second),
		logsRequest("q3", "node-b", 0),
		logsRequest("q4", "node-a", 3*time.Second),
	} {
		if err := s.AddRunRequest(ctx(t), r); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if err := s.AnswerRunRequest(ctx(t), "q4", "done", "", at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingRunRequests(ctx(t), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "q1,q2" {
		t.Errorf("pending requests of node-a = %v; want [q1 q2]: unanswered, oldest first, of that node only", ids)
	}
}

func testRunRequestDelete(t *testing.T, s store.Runs) {
	for _, r := range []store.RunRequest{logsRequest("old", "node-a", 0), logsRequest("new", "node-a", time.Minute), logsRequest("gone", "node-a", time.Minute)} {
		if err := s.AddRunRequest(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRunRequest(ctx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRunRequest(ctx(t), "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v; want ErrNotFound", err)
	}
	n, err := s.DeleteRunRequestsBefore(ctx(t), at(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("DeleteRunRequestsBefore = %d, %v; want 1", n, err)
	}
	if _, err := s.RunRequest(ctx(t), "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the old request: %v; want deleted", err)
	}
	if _, err := s.RunRequest(ctx(t), "new"); err != nil {
		t.Errorf("the newer request: %v; want kept", err)
	}
}
