package server

import (
	"reflect"
	"testing"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

func FuzzInboxWaitArgs(f *testing.F) {
	f.Add([]byte(`{"items":[{"approval":"apr-1"}],"timeout_ms":10}`), []byte(`{"action":"stage","identity":{"formId":"a","controlId":"b"},"ok":true,"snapshot":{"state":{"staged":{"revision":3,"provenance":{"principalId":"p"}}}}}`))
	f.Add([]byte(`{"items":[{"proposal":{"formId":"f","controlId":"c","subject":{"type":"t","id":"1"}},"revision":2}]}`), []byte(`{"action":"apply","identity":{"formId":"a","controlId":"b"},"ok":true}`))
	f.Add([]byte(`{"items":[{"command_proposal":"x","revision":-1}]}`), []byte(`null`))
	f.Add([]byte(`{"items":[{}]}`), []byte(`{"action":"discard"}`))
	f.Fuzz(func(t *testing.T, args, data []byte) {
		var a inboxWaitArgs
		if tool.DecodeArgs(args, &a) == nil {
			_ = checkWaitItems(a.Items)
		}
		p := store.Principal{ID: "p", Kind: store.KindAgent}
		h := newProposalHistory()
		h.observe(p, event.Event{Type: "control.command", Data: data})
		h.observe(p, event.Event{Type: "control.command", Data: data})
		// A pending revision is the one open on its control.
		for rev, r := range h.revs {
			if r.status == outcomePending && h.staged[r.key] != rev {
				t.Fatalf("revision %d is pending but not open", rev)
			}
		}
	})
}

// inbox_wait's advertised limits are the ones the wait keeps.
func TestInboxWaitLimitsAreAdvertised(t *testing.T) {
	s, err := tool.SchemaFor(reflect.TypeFor[inboxWaitArgs](), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Properties["items"].MaxItems; m == nil || *m != waitMaxItems {
		t.Errorf("items maxItems %v, want %d", m, waitMaxItems)
	}
	if m := s.Properties["timeout_ms"].Maximum; m == nil || int64(*m) != waitMax.Milliseconds() {
		t.Errorf("timeout_ms maximum %v, want %d", m, waitMax.Milliseconds())
	}
}
