package controls

import (
	"context"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// listArgs are controls_list's arguments.
type listArgs struct {
	FormID string `json:"formId,omitempty" jsonschema:"Only this form's controls."`
}

// inspectArgs are controls_inspect's arguments.
type inspectArgs struct {
	Identity control.Identity `json:"identity" jsonschema:"The control's stable identity."`
}

// inspectAnswer is controls_inspect's answer: the control's snapshot and
// the notes people wrote on the caller's own proposals for it.
type inspectAnswer struct {
	control.Snapshot
	Notes []inspectNote `json:"notes,omitempty" jsonschema:"What people wrote on your proposals for this control, oldest first: a note with an approval, the reason of a discard, or a reply without deciding. Only notes on revisions you staged."`
}

// inspectNote is one person's note on a proposal, as controls_inspect
// shows it to the proposer.
type inspectNote struct {
	By       string    `json:"by" jsonschema:"principal id of the person who wrote it"`
	Decision string    `json:"decision" jsonschema:"approve, decline (the proposal was discarded) or respond (no decision)"`
	Text     string    `json:"text"`
	At       time.Time `json:"at"`
	Revision int64     `json:"revision" jsonschema:"the revision of your proposal it was written on"`
}

// notesFor returns the notes on the proposals of the control id that
// principal staged, oldest first; another principal's are never among
// them.
func (s *Part) notesFor(ctx context.Context, principal string, id control.Identity) ([]inspectNote, error) {
	all, err := host.ReadControlNotes(ctx, s.Store.Settings, id.String())
	if err != nil {
		return nil, err
	}
	var out []inspectNote
	for _, n := range all {
		if n.Proposer == principal {
			out = append(out, inspectNote{By: n.By, Decision: n.Decision, Text: n.Text, At: n.At, Revision: n.Revision})
		}
	}
	return out, nil
}

// controlsList is controls_list's answer.
type controlsList struct {
	Controls []control.Snapshot `json:"controls"`
}

// forgedHint refuses what only a person's command carries.
const forgedHint = "an agent's commands always have source agent and are never confirmed; remove \"source\" and \"confirmed\""

// personActions are the commands only a person gives.
var personActions = []string{string(control.Apply), string(control.Clear), string(control.Undo), string(control.Discard)}

// executeSpec declares controls_execute.
func executeSpec() tool.Spec[executeArgs] {
	return tool.Spec[executeArgs]{
		Name:  "controls_execute",
		Title: "Run a control command",
		Description: "Run one command on a control: focus, reveal, highlight (durationMs 0-60000), explain, validate, or stage a proposed value. " +
			"A staged value is a proposal: it waits in a person's inbox, who applies or discards it; learn the outcome with inbox_wait. " +
			"When a person's standing rule covers the value, it is applied in their name at once and applied_under_rule names the rule.",
		Annotations: tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: false},
		Retired:     map[string]string{"source": forgedHint, "confirmed": forgedHint},
		// Apply, clear, undo and discard are a person's to give: they are
		// not offered over MCP, and a call that sends one anyway is refused
		// with human_confirmation_required.
		Unlisted: map[string][]string{"action": personActions},
		Example:  executeArgs{Action: control.Explain, Identity: control.Identity{FormID: "profile", ControlID: "plan"}},
	}
}

// controlTools are the MCP tools of the control registry. Their source is
// always agent: a call that names a source or a confirmation is refused.
func (s *Part) controlTools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec[listArgs]{
			Name:        "controls_list",
			Title:       "List controls",
			Description: "List the controls you can see, optionally of one form: identity, metadata, state, and the live and staged values (hidden for secret or unreadable controls).",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
		}, func(ctx context.Context, c tool.Call, a listArgs) (*tool.Reply[controlsList], error) {
			return tool.Answer(controlsList{Controls: s.List(ctx, c.Principal, a.FormID)}), nil
		}),
		tool.New(tool.Spec[inspectArgs]{
			Name:  "controls_inspect",
			Title: "Inspect a control",
			Description: "Return one control's snapshot: metadata, capabilities, state (validity included), live value and any staged proposal with its revision and provenance, " +
				"and the words people wrote on your proposals for it (notes), also after a proposal was applied or discarded.",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Example:     inspectArgs{Identity: control.Identity{FormID: "profile", ControlID: "plan"}},
		}, func(ctx context.Context, c tool.Call, a inspectArgs) (*tool.Reply[inspectAnswer], error) {
			snap, terr := s.Inspect(ctx, c.Principal, a.Identity)
			if terr != nil {
				return nil, terr
			}
			notes, err := s.notesFor(ctx, c.Principal.ID, snap.Identity)
			if err != nil {
				// The snapshot is still worth having without the notes.
				s.Log.Error("the notes on a control could not be read", "control", snap.Identity.String(), "err", err)
			}
			return tool.Answer(inspectAnswer{Snapshot: snap, Notes: notes}), nil
		}),
		tool.New(executeSpec(), func(ctx context.Context, c tool.Call, a executeArgs) (*tool.Reply[executeAnswer], error) {
			cmd, cerr := a.command()
			if cerr == nil {
				cerr = s.checkEscalation(ctx, a, control.SourceAgent)
			}
			if cerr != nil {
				return &tool.Reply[executeAnswer]{Out: executeAnswer{commandAnswer: answerOf(control.Result{Reason: cerr.Reason, Message: cerr.Message})}, IsError: true}, nil
			}
			res, due := s.execDeadline(ctx, c.Principal, cmd, control.CommandContext{Source: control.SourceAgent}, a.DeadlineSeconds, a.EscalateTo)
			if applied, rule, ok := s.applyUnderRule(ctx, c.Principal, res); ok {
				// A person's standing rule covered the value: it is applied
				// in their name, and no one is asked.
				a := answerOf(applied)
				a.AppliedUnderRule = rule
				a.Message = "Applied at once under standing rule " + rule + ", in the name of the person who made it; no one was asked."
				a.Message = "Applied at once under standing rule " + rule + ", in the name of the person who made it; no one was asked."
				return tool.Answer(executeAnswer{commandAnswer: a}), nil
			}
			if res.OK && res.Action == control.Stage {
				// A staged value waits for a person in the inbox.
				inbox := strings.TrimRight(s.Config.BaseURL, "/") + "/inbox"
				ans := answerOf(res)
				if !due.IsZero() {
					ans.Deadline = store.FormatTime(due)
				}
				return &tool.Reply[executeAnswer]{Out: executeAnswer{commandAnswer: ans, URL: inbox}, Decision: inbox}, nil
			}
			return &tool.Reply[executeAnswer]{Out: executeAnswer{commandAnswer: answerOf(res)}, IsError: !res.OK}, nil
		}),
	}
}

// executeAnswer is controls_execute's answer: the command's result, with
// the page where a person decides a staged value, or the refusal as the
// one error object.
type executeAnswer struct {
	commandAnswer
	URL string `json:"url,omitempty" jsonschema:"page where a person decides a staged value"`
}
