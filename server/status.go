package server

import (
	"context"
	"sync"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// openMemo remembers each principal's counts of open items, so that
// runtime_status does not count them again (listing Runs from the store)
// on every call. Every change that alters a count publishes an event, so
// counts are reused only while the bus's sequence number is the one they
// were computed at, and for at most openMemoTTL, which also covers what no
// event announces (a Run's process dying before its supervisor notices).
type openMemo struct {
	now func() time.Time // monotonic clock; nil means time.Now

	mu sync.Mutex
	m  map[string]openCounts
}

type openCounts struct {
	seq    int64
	at     time.Time
	counts map[string]int
}

// get returns p's counts, from memory when still valid, otherwise counted
// by count. The returned map is shared: callers must not change it.
func (o *openMemo) get(bus *event.Bus, p store.Principal, count func() map[string]int) map[string]int {
	clock := o.now
	if clock == nil {
		clock = time.Now
	}
	seq, now := bus.Seq(), clock()
	o.mu.Lock()
	c, ok := o.m[p.ID]
	o.mu.Unlock()
	if ok && c.seq == seq && now.Sub(c.at) < openMemoTTL {
		return c.counts
	}
	// The sequence is read before counting: an event published while
	// counting makes the result stale at the next call.
	counts := count()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= openMemoSize {
		o.m = map[string]openCounts{}
	}
	o.m[p.ID] = openCounts{seq: seq, at: now, counts: counts}
	return counts
}

// runtimeStatus is runtime_status's answer.
type runtimeStatus struct {
	Version   string          `json:"version"`
	Principal statusPrincipal `json:"principal"`
	Uptime    int64           `json:"uptime_seconds"`
	Open      map[string]int  `json:"open"`
}

type statusPrincipal struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// runtimeStatusTool reports the runtime's state to the caller.
func (s *Server) runtimeStatusTool() tool.Tool {
	memo := &openMemo{}
	return tool.New(tool.Spec[struct{}]{
		Name:        "runtime_status",
		Title:       "Runtime status",
		Description: "Report the assent runtime's version, who you are (principal id and kind), how long it has been up, and how many items are open for you: what you filed that waits for a person (proposals, flow_approvals, command_proposals, screen_presses, questions) and your active runs.",
		Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
	}, func(ctx context.Context, c tool.Call, _ struct{}) (*tool.Reply[runtimeStatus], error) {
		return tool.Answer(runtimeStatus{
			Version:   assent.Version,
			Principal: statusPrincipal{ID: c.Principal.ID, Kind: c.Principal.Kind},
			Uptime:    int64(s.host.Now().Sub(s.host.Started).Seconds()),
			Open: memo.get(s.host.Bus, c.Principal, func() map[string]int {
				return s.host.OpenItems(ctx, c.Principal)
			}),
		}), nil
	})
}

// openMemoTTL bounds how long runtime_status trusts remembered counts of
// open items; any event on the bus makes them stale at once.
const openMemoTTL = time.Second

// openMemoSize bounds how many principals' counts are remembered.
const openMemoSize = 1024
