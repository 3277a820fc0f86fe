package controls

import (
	"context"
	"strings"

	"github.com/assent-run/assent/control"
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
			Name:        "controls_inspect",
			Title:       "Inspect a control",
			Description: "Return one control's snapshot: metadata, capabilities, state (validity included), live value and any staged proposal with its revision and provenance.",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Example:     inspectArgs{Identity: control.Identity{FormID: "profile", ControlID: "plan"}},
		}, func(ctx context.Context, c tool.Call, a inspectArgs) (*tool.Reply[control.Snapshot], error) {
			snap, terr := s.Inspect(ctx, c.Principal, a.Identity)
			if terr != nil {
				return nil, terr
			}
			return tool.Answer(snap), nil
		}),
		tool.New(executeSpec(), func(ctx context.Context, c tool.Call, a executeArgs) (*tool.Reply[executeAnswer], error) {
			cmd, cerr := a.command()
			if cerr != nil {
				return &tool.Reply[executeAnswer]{Out: executeAnswer{commandAnswer: answerOf(control.Result{Reason: cerr.Reason, Message: cerr.Message})}, IsError: true}, nil
			}
			res := s.Exec(ctx, c.Principal, cmd, control.CommandContext{Source: control.SourceAgent})
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
				return &tool.Reply[executeAnswer]{Out: executeAnswer{commandAnswer: answerOf(res), URL: inbox}, Decision: inbox}, nil
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
