package controls

import (
	"context"
	"encoding/json"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// Standing decides whether a person's standing rule lets an agent's staged
// value through without asking them again. The rules part implements it;
// the controls part asks it each time an agent stages a value.
type Standing interface {
	// Covering returns the live rule that covers agent staging value (as
	// JSON) on the control id, and the person in whose name it is applied,
	// who may still apply it themselves now. ok is false when no rule
	// does.
	Covering(ctx context.Context, agent store.Principal, id control.Identity, value json.RawMessage) (ruleID string, person store.Principal, ok bool)
}

// UseStanding makes s's standing rules apply to the values agents stage
// from now on. It is called once, while the server is built.
func (s *Part) UseStanding(st Standing) { s.standing = st }

// RuleSession prefixes the session id of the provenance of a change a
// standing rule applied: "rule:<id>" stands where a person's session
// would, so the change names its rule wherever it is shown.
const RuleSession = "rule:"

// underRuleKey is the context key of the id of the standing rule a
// command runs under; Exec writes it into the command's audit record.
type underRuleKey struct{}

// applyUnderRule applies, in the rule creator's name, the value agent p
// just staged (res) when a standing rule covers it. It returns the
// apply's result and the rule's id, or ok false when no rule covers the
// value or the apply was refused; the proposal then waits in the inbox.
func (s *Part) applyUnderRule(ctx context.Context, p store.Principal, res control.Result) (control.Result, string, bool) {
	st := res.Snapshot.State
	if s.standing == nil || !res.OK || res.Action != control.Stage || p.Kind == store.KindHuman ||
		st.Staged == nil || st.StagedValueRedacted || st.ValueRedacted || st.Staged.Provenance.PrincipalID != p.ID {
		return control.Result{}, "", false
	}
	value, err := json.Marshal(st.StagedValue)
	if err != nil {
		return control.Result{}, "", false
	}
	id := res.Snapshot.Identity
	ruleID, person, ok := s.standing.Covering(ctx, p, id, value)
	if !ok {
		return control.Result{}, "", false
	}
	cmd := control.Command{Action: control.Apply, Identity: id, Revision: st.Staged.Revision}
	applied := s.Exec(context.WithValue(ctx, underRuleKey{}, ruleID), person, cmd,
		control.CommandContext{Source: control.SourceUser, Confirmed: true, SessionID: RuleSession + ruleID})
	if !applied.OK {
		s.Log.Info("a standing rule covered a staged value, which could not be applied; it waits in the inbox",
			"rule", ruleID, "control", id.String(), "reason", applied.Reason)
		return control.Result{}, "", false
	}
	return applied, ruleID, true
}
