package flows

import (
	"context"
	"slices"
	"strings"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// StartCheckFunc checks, and may complete, the facts of an instance of one
// program before it starts (see Part.RegisterStartCheck). facts is the
// starter's map, never nil; the function may add or change entries. An
// error, best a *tool.Error, refuses the start.
type StartCheckFunc func(ctx context.Context, starter store.Principal, phase string, facts map[string]flow.Fact) error

// RegisterStartCheck makes fn check every instance of the program
// programID before it starts, whoever starts it: the place for an
// application's rules on the facts a starter gives, such as a band that
// must agree with an amount. Registering again for the same program
// replaces fn.
func (s *Part) RegisterStartCheck(programID string, fn StartCheckFunc) {
	s.startChecks.set(programID, fn)
}

// checkStart decides whether p may start an instance of prog as req asks.
//
// An agent starts in one of the program's entry phases and gives none of
// the facets its transitions establish: were it free to say where an
// instance stands, it could start one past a step the law keeps for a
// person (an approval) or claim an outcome (a payment sent). People and
// services, who act for the people that hold them, may start anywhere.
// Then the application's start check of the program runs, whoever starts.
// Nobody starts an instance in a phase the program does not name.
func (s *Part) checkStart(ctx context.Context, p store.Principal, prog *flow.Program, req *StartRequest) error {
	if phases := prog.Phases(); !slices.Contains(phases, req.Phase) {
		return tool.Errorf("invalid_request", "program %s has no phase %q, so an instance there could never move; its phases are %s", prog.ID(), req.Phase, strings.Join(phases, ", "))
	}
	if p.Kind == store.KindAgent {
		entry := prog.EntryPhases()
		if !slices.Contains(entry, req.Phase) {
			if len(entry) == 0 {
				return tool.Errorf("forbidden", "program %s has no entry phase (every phase is reached through a transition), so an agent cannot start its instances; a person or a service starts them", prog.ID())
			}
			return tool.Errorf("forbidden", "an agent starts an instance of %s in an entry phase (%s), not in %q: later phases are reached through the program's transitions", prog.ID(), strings.Join(entry, ", "), req.Phase)
		}
		derived := prog.DerivedFacets()
		var given []string
		for facet := range req.Facts {
			if _, found := slices.BinarySearch(derived, facet); found {
				given = append(given, facet)
			}
		}
		if len(given) > 0 {
			slices.Sort(given)
			return tool.Errorf("forbidden", "an agent does not give %s when it starts an instance of %s: the program's transitions establish it; leave it out", strings.Join(given, ", "), prog.ID())
		}
	}
	check := s.startChecks.get(prog.ID())
	if check == nil {
		return nil
	}
	if req.Facts == nil {
		req.Facts = map[string]flow.Fact{}
	}
	return check(ctx, p, req.Phase, req.Facts)
}
