package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func publishN(b *Bus, n int, owner string) {
	for i := 0; i < n; i++ {
		b.Publish(Event{Type: "t", Owner: owner, Data: json.RawMessage(fmt.Sprint(i))})
	}
}

func drain(t *testing.T, s *Subscription, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []Event
	for len(out) < n {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, e)
	}
	return out
}

func TestResumeWithoutGapsOrDuplicates(t *testing.T) {
	b := New(Options{Replay: 100})
	s := b.Subscribe(0, 0, nil)
	publishN(b, 10, "")
	got := drain(t, s, 4)
	last := got[len(got)-1].Seq
	s.Close() // disconnect after the 4th event

	publishN(b, 5, "")
	s2 := b.Subscribe(last, 0, nil)
	defer s2.Close()
	rest := drain(t, s2, 11)
	for i, e := range rest {
		if want := last + int64(i) + 1; e.Seq != want || e.Type != "t" {
			t.Fatalf("event %d: seq %d type %q, want seq %d", i, e.Seq, e.Type, want)
		}
	}
}

func TestSlowSubscriberLagsAlone(t *testing.T) {
	b := New(Options{Replay: 1000})
	slow := b.Subscribe(0, 3, nil)
	fast := b.Subscribe(0, 100, nil)
	defer slow.Close()
	defer fast.Close()
	publishN(b, 10, "")

	got := drain(t, fast, 10)
	for i, e := range got {
		if e.Type != "t" || e.Seq != int64(i+1) {
			t.Fatalf("fast subscriber event %d = %+v", i, e)
		}
	}
	got = drain(t, slow, 4)
	for i := 0; i < 3; i++ {
		if got[i].Seq != int64(i+1) {
			t.Fatalf("slow event %d seq %d", i, got[i].Seq)
		}
	}
	if got[3].Type != Lagged {
		t.Fatalf("4th event is %q, want lagged", got[3].Type)
	}
	var d LaggedData
	if err := json.Unmarshal(got[3].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Missed != 7 || d.ResumeAfter != 3 {
		t.Fatalf("lagged = %+v, want missed 7 after 3", d)
	}
	// After the gap, delivery resumes normally.
	b.Publish(Event{Type: "after"})
	if e := drain(t, slow, 1)[0]; e.Type != "after" || e.Seq != 11 {
		t.Fatalf("after lag got %+v", e)
	}
}

func TestResumeOlderThanReplay(t *testing.T) {
	b := New(Options{Replay: 5})
	publishN(b, 20, "")
	s := b.Subscribe(2, 0, nil)
	defer s.Close()
	got := drain(t, s, 6)
	if got[0].Type != Lagged {
		t.Fatalf("first event %q, want lagged", got[0].Type)
	}
	for i, e := range got[1:] {
		if e.Seq != int64(16+i) {
			t.Fatalf("replayed seq %d, want %d", e.Seq, 16+i)
		}
	}
}

func TestFilterAndOwner(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, func(e Event) bool { return e.Owner == "" || e.Owner == "alice" })
	defer s.Close()
	b.Publish(Event{Type: "bob", Owner: "bob"})
	b.Publish(Event{Type: "alice", Owner: "alice"})
	b.Publish(Event{Type: "all"})
	got := drain(t, s, 2)
	if got[0].Type != "alice" || got[1].Type != "all" {
		t.Fatalf("got %q, %q", got[0].Type, got[1].Type)
	}
}

func TestCloseWakesReader(t *testing.T) {
	b := New(Options{})
	s := b.Subscribe(0, 0, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	var err error
	go func() {
		defer wg.Done()
		_, err = s.Next(context.Background())
	}()
	b.Close()
	wg.Wait()
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
}

func TestConcurrentPublish(t *testing.T) {
	b := New(Options{Replay: 10000})
	s := b.Subscribe(0, 10000, nil)
	defer s.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); publishN(b, 500, "") }()
	}
	wg.Wait()
	got := drain(t, s, 4000)
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

func BenchmarkPublish1000Subscribers(b *testing.B) {
	bus := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		s := bus.Subscribe(0, 1024, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := s.Next(ctx); err != nil {
					return
				}
			}
		}()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bus.Publish(Event{Type: "t"})
	}
	b.StopTimer()
	bus.Close()
	wg.Wait()
}

func TestVisibleTo(t *testing.T) {
	for _, tc := range []struct {
		e     Event
		id    string
		human bool
		want  bool
	}{
		{Event{}, "a", false, true},
		{Event{Owner: "a"}, "a", false, true},
		{Event{Owner: "a"}, "b", false, false},
		{Event{Owner: "a"}, "b", true, false},
		{Event{Owner: "a", People: true}, "a", false, true},
		{Event{Owner: "a", People: true}, "b", true, true},
		{Event{Owner: "a", People: true}, "b", false, false},
		{Event{People: true}, "b", false, false},
		{Event{People: true}, "b", true, true},
		{Event{Owner: "a", Audience: []string{"p"}}, "p", true, true},
		{Event{Owner: "a", Audience: []string{"p"}}, "q", true, false},
		{Event{Owner: "a", Audience: []string{"p"}}, "a", false, true},
		{Event{Owner: "a", Audience: []string{"p"}}, "b", false, false},
		{Event{Owner: "a", Audience: []string{}}, "q", true, false},
		{Event{Audience: []string{"p"}}, "p", true, true},
		{Event{Audience: []string{"p"}}, "q", true, false},
		{Event{Audience: []string{"p"}}, "", false, false},
		{Event{Owner: "a", Audience: []string{"p"}, People: true}, "q", true, true},
		{Event{Owner: "a", Audience: []string{"p"}, People: true}, "b", false, false},
	} {
		if got := tc.e.VisibleTo(tc.id, tc.human); got != tc.want {
			t.Errorf("%+v.VisibleTo(%q, human=%v) = %v, want %v", tc.e, tc.id, tc.human, got, tc.want)
		}
	}
}

// BenchmarkVisibleTo measures the per-subscriber cost of an event with an
// audience of supervisors, which every subscriber evaluates on publish.
func BenchmarkVisibleTo(b *testing.B) {
	e := Event{Owner: "p_agent", Audience: []string{"p_owner", "p_second", "p_third"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if e.VisibleTo("p_stranger", true) {
			b.Fatal("visible to a stranger")
		}
	}
}

func TestLaggedCarriesBothSpellings(t *testing.T) {
	b := New(Options{Replay: 2})
	defer b.Close()
	for range 4 {
		b.Publish(Event{Type: "x"})
	}
	sub := b.Subscribe(0, 8, nil)
	defer sub.Close()
	e, err := sub.Next(context.Background())
	if err != nil || e.Type != Lagged {
		t.Fatalf("first event %+v, %v; want lagged", e, err)
	}
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil || d["resume_after"] == nil || d["resumeAfter"] != nil {
		t.Fatalf("lagged data %s", e.Data)
	}
}
