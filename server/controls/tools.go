package controls

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/tool"
)

const identitySchema = `{"type":"object","description":"The control's stable identity.","properties":{
  "formId":{"type":"string","minLength":1,"maxLength":256},
  "controlId":{"type":"string","minLength":1,"maxLength":256},
  "subject":{"type":"object","properties":{"type":{"type":"string"},"id":{"type":"string"},"label":{"type":"string"}},"required":["type","id"]}},
  "required":["formId","controlId"]}`

// controlTools are the MCP tools of the control registry. Their source is
// always agent: a call that names a source or a confirmation is refused.
func (s *Part) controlTools() []tool.Tool {
	return []tool.Tool{
		{
			Name:         "controls_list",
			Title:        "List controls",
			Description:  "List the controls you can see, optionally of one form: identity, metadata, state, and the live and staged values (hidden for secret or unreadable controls).",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"formId":{"type":"string","description":"Only this form's controls."}},"additionalProperties":false}`),
			OutputSchema: controlsListSchema,
			Annotations:  tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					FormID string `json:"formId"`
				}
				if err := decodeControlArgs(c.Args, &a); err != nil {
					return nil, err
				}
				return &tool.Result{Structured: map[string]any{"controls": s.List(ctx, c.Principal, a.FormID)}}, nil
			},
		},
		{
			Name:         "controls_inspect",
			Title:        "Inspect a control",
			Description:  "Return one control's snapshot: metadata, capabilities, state (validity included), live value and any staged proposal with its revision and provenance.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"identity":` + identitySchema + `},"required":["identity"],"additionalProperties":false}`),
			OutputSchema: controlSnapshotSchema,
			Annotations:  tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					Identity control.Identity `json:"identity"`
				}
				if err := decodeControlArgs(c.Args, &a); err != nil {
					return nil, err
				}
				snap, terr := s.Inspect(ctx, c.Principal, a.Identity)
				if terr != nil {
					return nil, terr
				}
				return &tool.Result{Structured: snap}, nil
			},
		},
		{
			Name:  "controls_execute",
			Title: "Run a control command",
			Description: "Run one command on a control: focus, reveal, highlight (durationMs 0-60000), explain, validate, or stage a proposed value. " +
				"Apply, clear, undo and discard are a person's to give: for an agent they are refused with human_confirmation_required, and the staged proposal waits in the person's inbox.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
  "action":{"type":"string","enum":["focus","reveal","highlight","explain","validate","stage","apply","clear","undo","discard"]},
  "identity":` + identitySchema + `,
  "value":{"description":"The value to stage."},
  "durationMs":{"type":"integer","minimum":0,"maximum":60000},
  "revision":{"type":"integer","minimum":1,"description":"The proposal revision you saw."}},
  "required":["action","identity"],"additionalProperties":false}`),
			OutputSchema: controlResultSchema,
			Annotations:  tool.Annotations{ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: false},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a executeRequest
				if err := decodeControlArgs(c.Args, &a); err != nil {
					return nil, err
				}
				if a.Source != nil || a.Confirmed != nil {
					return nil, tool.Errorf("invalid_request", "an agent's commands always have source agent and are never confirmed; remove \"source\" and \"confirmed\"")
				}
				cmd, cerr := a.command()
				if cerr != nil {
					return &tool.Result{Structured: answerOf(control.Result{Reason: cerr.Reason, Message: cerr.Message}), IsError: true}, nil
				}
				res := s.Exec(ctx, c.Principal, cmd, control.CommandContext{Source: control.SourceAgent})
				if res.OK && res.Action == control.Stage {
					// A staged value waits for a person in the inbox.
					inbox := strings.TrimRight(s.Config.BaseURL, "/") + "/inbox"
					return &tool.Result{Structured: stagedResult{Result: res, URL: inbox}, Decision: inbox}, nil
				}
				return &tool.Result{Structured: answerOf(res), IsError: !res.OK}, nil
			},
		},
	}
}

// stagedResult is the answer to a stage command: the command's result and
// the page where a person decides the staged value.
type stagedResult struct {
	control.Result
	URL string `json:"url"`
}

// Output schemas of the controls_* tools.
var (
	controlResultSchema = json.RawMessage(`{"type":"object","properties":{
"ok":{"type":"boolean"},
"action":{"type":"string"},
"identity":{"type":"object"},
"snapshot":{"type":"object","description":"the control after the command"},
"reason":{"type":"string","description":"why the command was refused"},
"message":{"type":"string"},
"url":{"type":"string","description":"page where a person decides a staged value"},
"error":{"type":"object","description":"a refusal as the one error object: code (the reason), message, retryable"}},
"required":["ok"],"additionalProperties":true}`)
	controlsListSchema = json.RawMessage(`{"type":"object","properties":{
"controls":{"type":["array","null"],"items":{"type":"object"}}},
"required":["controls"],"additionalProperties":true}`)
	controlSnapshotSchema = json.RawMessage(`{"type":"object","properties":{
"identity":{"type":"object"},
"state":{"type":"object"}},"additionalProperties":true}`)
)

// decodeControlArgs decodes tool arguments strictly. Identity limits are
// checked by the registry (limit_exceeded).
func decodeControlArgs(args json.RawMessage, v any) error { return tool.DecodeArgs(args, v) }
