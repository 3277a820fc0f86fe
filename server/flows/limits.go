package flows

import (
	"context"
	"slices"
	"sync"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// Limits bound what a principal whose loads are only proposals (an agent,
// or a service without flow.load) may put before people: the programs it
// proposes and the approvals it files. A person's or the operator's load
// is bounded only by flow.MaxDocumentSize. Past a bound the request is
// refused limit_exceeded and nothing is stored.
type Limits struct {
	// ProgramBytes is the largest program source a proposal may have.
	ProgramBytes int
	// ProgramTransitions is the most transitions a proposed program may
	// declare.
	ProgramTransitions int
	// PendingPrograms is how many of one principal's proposed programs may
	// wait for a person's decision at once.
	PendingPrograms int
	// PendingApprovals is how many of one principal's Flow approval
	// requests may wait for a person's decision at once.
	PendingApprovals int
}

// DefaultLimits are the bounds a server starts with (see docs/flows.md).
var DefaultLimits = Limits{
	ProgramBytes:       1 << 20,
	ProgramTransitions: 1000,
	PendingPrograms:    8,
	PendingApprovals:   32,
}

// SetLimits replaces the bounds on what agents propose; a bound of zero or
// less keeps its default.
func (s *Part) SetLimits(l Limits) {
	d := DefaultLimits
	for _, f := range []struct{ dst, src *int }{
		{&d.ProgramBytes, &l.ProgramBytes}, {&d.ProgramTransitions, &l.ProgramTransitions},
		{&d.PendingPrograms, &l.PendingPrograms}, {&d.PendingApprovals, &l.PendingApprovals},
	} {
		if *f.src > 0 {
			*f.dst = *f.src
		}
	}
	s.limitsMu.Lock()
	s.limits = d
	s.limitsMu.Unlock()
}

// Limits returns the bounds on what agents propose.
func (s *Part) Limits() Limits {
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	return s.limits
}

// proposes reports whether a load by p is only a proposal, which a person
// approves before it starts anything.
func proposes(p store.Principal) bool {
	switch p.Kind {
	case store.KindHuman:
		return false
	case store.KindService:
		return !slices.Contains(p.Grants, flow.CapabilityFlowLoad)
	}
	return true
}

func limitExceeded(format string, args ...any) error {
	return tool.Errorf("limit_exceeded", format, args...)
}

// checkProposal applies the bounds on a program p proposes: its size, its
// transitions, and how many of p's proposals already wait. A proposal of a
// program p already proposed, which stores nothing new, is not counted
// again. The caller holds s.proposeMu until the program is stored, so two
// proposals at once cannot both take the last place.
func (s *Part) checkProposal(ctx context.Context, p store.Principal, src []byte) error {
	lim := s.Limits()
	if len(src) > lim.ProgramBytes {
		return limitExceeded("the program is %d bytes; a program an agent proposes is at most %d bytes. Split it into smaller programs, or ask a person to load it", len(src), lim.ProgramBytes)
	}
	prog, err := flow.Load(src, s.flowInv)
	if err != nil {
		return err
	}
	if n := prog.Len(); n > lim.ProgramTransitions {
		return limitExceeded("the program declares %d transitions; a program an agent proposes has at most %d. Split it into smaller programs, or ask a person to load it", n, lim.ProgramTransitions)
	}
	loads, err := s.flows.ProgramLoads(ctx)
	if err != nil {
		return err
	}
	waiting := 0
	for _, l := range loads {
		if l.Status != flow.ProgramProposed || l.LoadedBy != p.ID {
			continue
		}
		if l.Fingerprint == prog.Fingerprint() {
			return nil
		}
		waiting++
	}
	if waiting >= lim.PendingPrograms {
		return limitExceeded("%d of your proposed programs already wait for a person; wait for their decisions before proposing more (the limit is %d)", waiting, lim.PendingPrograms)
	}
	return nil
}

// checkApprovalRoom refuses a new approval request by p for transition of
// instance while p already has PendingApprovals requests waiting. Asking
// again for a request that already waits files nothing new, so it passes.
func (s *Part) checkApprovalRoom(ctx context.Context, p store.Principal, instance, transition string) error {
	if p.Kind == store.KindHuman {
		return nil
	}
	pending, err := s.flows.PendingApprovals(ctx)
	if err != nil {
		return err
	}
	waiting := 0
	for _, a := range pending {
		if a.Requester != p.ID {
			continue
		}
		if a.Instance == instance && (transition == "" || a.Transition == transition || flow.LocalID(a.Transition) == flow.LocalID(transition)) {
			return nil
		}
		waiting++
	}
	if lim := s.Limits().PendingApprovals; waiting >= lim {
		return limitExceeded("%d of your approval requests already wait for a person; wait for their decisions before asking for more (the limit is %d)", waiting, lim)
	}
	return nil
}

// programSummaries keeps what lists show of each stored program, by
// fingerprint. A program never changes under its fingerprint, so its
// summary is worked out once, not on every list: reading it from the
// program copies the whole program.
type programSummaries struct {
	mu sync.Mutex
	m  map[string]programView
}

func (c *programSummaries) get(p *flow.Program) programView {
	c.mu.Lock()
	v, ok := c.m[p.Fingerprint()]
	c.mu.Unlock()
	if ok {
		v.Objectives = slices.Clone(v.Objectives)
		return v
	}
	v = viewProgram(p)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]programView{}
	}
	c.m[p.Fingerprint()] = v
	c.mu.Unlock()
	v.Objectives = slices.Clone(v.Objectives)
	return v
}

// maxDrawnTransitions is the most transitions the Flows page draws and
// lists for one program; a larger program shows its summary, with where
// to read it whole.
const maxDrawnTransitions = 200
