package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzExecute decodes arbitrary JSON as a command and context and runs it
// against a small form. Execute must never panic, a refusal must always
// carry a reason and a message, and the value of the redacted control must
// never appear in a result.
func FuzzExecute(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"action":"stage","identity":{"formId":"profile","controlId":"name"},"value":"Grace"}`, `{"source":"agent"}`},
		{`{"action":"apply","identity":{"formId":"profile","controlId":"name"},"revision":1}`, `{"source":"user","confirmed":true}`},
		{`{"action":"apply","identity":{"formId":"profile","controlId":"key"},"value":"x"}`, `{}`},
		{`{"action":"highlight","identity":{"formId":"profile","controlId":"name"},"durationMs":70000}`, `{"source":"voice"}`},
		{`{"action":"undo","identity":{"formId":"profile","controlId":"hidden","subject":{"type":"t","id":"1"}}}`, `{"source":"test","confirmed":true}`},
		{`{"action":"discard","identity":{"formId":"profile","controlId":"hidden"}}`, `{"source":"robot"}`},
		{`{"action":"stage","identity":{"formId":"profile","controlId":"hidden"},"value":{"a":[1,2,{"b":null}]}}`, `{"source":"agent"}`},
	} {
		f.Add(seed[0], seed[1], seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, cmd1, cc1, cmd2, cc2 string) {
		r := New(Config{HistoryDepth: 2})
		mustRegister(t, r, Registration{Identity: Identity{FormID: "profile", ControlID: "name"}, Metadata: text("Name"), Handles: NewValue("Ada").Handles()})
		mustRegister(t, r, Registration{Identity: Identity{FormID: "profile", ControlID: "key"}, Metadata: Metadata{Kind: KindPassword, Sensitivity: Secret}, Handles: NewValue("hunter2").Handles()})
		mustRegister(t, r, Registration{Identity: Identity{FormID: "profile", ControlID: "hidden"}, Metadata: Metadata{Kind: KindText, Readable: Bool(false)}, Handles: NewValue("hunter2").Handles()})
		for _, in := range [][2]string{{cmd1, cc1}, {cmd2, cc2}, {cmd1, cc1}} {
			var cmd Command
			var cc CommandContext
			if json.Unmarshal([]byte(in[0]), &cmd) != nil || json.Unmarshal([]byte(in[1]), &cc) != nil {
				continue
			}
			res := r.Execute(context.Background(), cmd, cc)
			if !res.OK && (res.Reason == "" || res.Message == "") {
				t.Fatalf("refusal without reason or message: %+v", res)
			}
			if res.OK && res.Reason != "" {
				t.Fatalf("success with a reason: %+v", res)
			}
			b, err := json.Marshal(res)
			if err != nil {
				continue // a value that JSON cannot represent
			}
			if strings.Contains(string(b), "hunter2") {
				t.Fatalf("result leaks a redacted value: %s", b)
			}
		}
		_ = r.List(context.Background(), "")
		_ = r.Proposals(context.Background(), "")
		_ = r.Changes(context.Background(), "")
	})
}

func TestNilContext(t *testing.T) {
	r := New(Config{})
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: NewValue("Ada").Handles()})
	var ctx context.Context // nil on purpose: bad input must not panic
	if res := r.Execute(ctx, Command{Action: Apply, Identity: profile, Value: "Grace"}, person); !res.OK {
		t.Fatalf("Execute with nil context: %+v", res)
	}
	if len(r.List(ctx, "")) != 1 || len(r.Changes(ctx, "")) != 1 || len(r.Proposals(ctx, "")) != 0 {
		t.Error("listing with a nil context failed")
	}
	if _, ok := r.Get(ctx, profile); !ok {
		t.Error("Get with a nil context failed")
	}
}
