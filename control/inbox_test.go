package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestProposals(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	r := New(Config{Now: c.now})
	name := Identity{FormID: "profile", ControlID: "name"}
	email := Identity{FormID: "profile", ControlID: "email"}
	hidden := Identity{FormID: "profile", ControlID: "hidden"}
	other := Identity{FormID: "billing", ControlID: "plan"}
	nameV := NewValue("Ada")
	for _, reg := range []Registration{
		{Identity: name, Metadata: text("Name"), Handles: nameV.Handles()},
		{Identity: email, Metadata: text("Email"), Handles: NewValue("ada@example.com").Handles()},
		{Identity: hidden, Metadata: Metadata{Kind: KindText, Label: "Hidden", Readable: Bool(false)}, Handles: NewValue("hunter2").Handles()},
		{Identity: other, Metadata: text("Plan"), Handles: NewValue("free").Handles()},
	} {
		mustRegister(t, r, reg)
	}
	if got := r.Proposals(ctx, ""); len(got) != 0 {
		t.Fatalf("proposals before staging: %+v", got)
	}
	exec(t, r, Command{Action: Stage, Identity: other, Value: "pro"}, agent)
	exec(t, r, Command{Action: Stage, Identity: hidden, Value: "swordfish"}, agent)
	exec(t, r, Command{Action: Stage, Identity: name, Value: "Grace"}, CommandContext{Source: SourceVoice, PrincipalID: "ada"})
	nameV.Store("Katherine")

	all := r.Proposals(ctx, "")
	if len(all) != 3 {
		t.Fatalf("%d proposals, want 3", len(all))
	}
	// Registration order: name, hidden, other.
	if !all[0].Identity.Equal(name) || !all[1].Identity.Equal(hidden) || !all[2].Identity.Equal(other) {
		t.Errorf("order = %v %v %v", all[0].Identity, all[1].Identity, all[2].Identity)
	}
	p := all[0].State
	if p.Value != "Katherine" || p.StagedValue != "Grace" || !p.Staged.Stale || p.Staged.Provenance.Source != SourceVoice || p.Staged.Provenance.PrincipalID != "ada" || p.Staged.Revision != 3 {
		t.Errorf("name proposal = %+v %+v", p, p.Staged)
	}
	h := all[1].State
	if !h.ValueRedacted || !h.StagedValueRedacted || h.StagedValue != nil || h.Staged.Stale {
		t.Errorf("hidden proposal = %+v", h)
	}
	b, _ := json.Marshal(all)
	if strings.Contains(string(b), "swordfish") || strings.Contains(string(b), "hunter2") {
		t.Errorf("proposals leak a redacted value: %s", b)
	}
	if got := r.Proposals(ctx, "billing"); len(got) != 1 || got[0].State.StagedValue != "pro" {
		t.Errorf("Proposals(billing) = %+v", got)
	}
	exec(t, r, Command{Action: Discard, Identity: other}, person)
	if got := r.Proposals(ctx, "billing"); len(got) != 0 {
		t.Errorf("discarded proposal still listed: %+v", got)
	}
}

func TestChanges(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	r := New(Config{Now: c.now})
	a := Identity{FormID: "f", ControlID: "a"}
	b := Identity{FormID: "f", ControlID: "b"}
	s := Identity{FormID: "g", ControlID: "secret"}
	av, bv := NewValue("a0"), NewValue("b0")
	mustRegister(t, r, Registration{Identity: a, Metadata: text("A"), Handles: av.Handles()})
	mustRegister(t, r, Registration{Identity: b, Metadata: text("B"), Handles: bv.Handles()})
	mustRegister(t, r, Registration{Identity: s, Metadata: Metadata{Kind: KindText, Label: "S", Readable: Bool(false)}, Handles: NewValue("hunter2").Handles()})
	if got := r.Changes(ctx, ""); len(got) != 0 {
		t.Fatalf("changes before any: %+v", got)
	}
	exec(t, r, Command{Action: Apply, Identity: a, Value: "a1"}, person)
	exec(t, r, Command{Action: Apply, Identity: b, Value: "b1"}, person)
	exec(t, r, Command{Action: Apply, Identity: s, Value: "swordfish"}, person)
	exec(t, r, Command{Action: Clear, Identity: a}, CommandContext{Source: SourceTest, Confirmed: true, PrincipalID: "t"})
	bv.Store("edited")

	got := r.Changes(ctx, "")
	if len(got) != 3 {
		t.Fatalf("%d changes, want 3", len(got))
	}
	// Newest first: a's clear, then s, then b.
	if !got[0].Identity.Equal(a) || !got[1].Identity.Equal(s) || !got[2].Identity.Equal(b) {
		t.Errorf("order = %v, %v, %v", got[0].Identity, got[1].Identity, got[2].Identity)
	}
	ca := got[0]
	if ca.Action != Clear || ca.Previous != "a1" || ca.Applied != nil || ca.Depth != 2 || ca.Stale || ca.Label != "A" || ca.Provenance.Source != SourceTest {
		t.Errorf("a = %+v", ca)
	}
	if cb := got[2]; cb.Previous != "b0" || cb.Applied != "b1" || !cb.Stale || cb.Depth != 1 {
		t.Errorf("b = %+v", cb)
	}
	if cs := got[1]; !cs.ValueRedacted || cs.Previous != nil || cs.Applied != nil {
		t.Errorf("secret change = %+v", cs)
	}
	js, _ := json.Marshal(got)
	if strings.Contains(string(js), "swordfish") || strings.Contains(string(js), "hunter2") {
		t.Errorf("changes leak: %s", js)
	}
	if !strings.Contains(string(js), `"applied":null`) {
		t.Errorf("a visible null value should be present: %s", js)
	}
	if got := r.Changes(ctx, "g"); len(got) != 1 || !got[0].Identity.Equal(s) {
		t.Errorf("Changes(g) = %+v", got)
	}
	exec(t, r, Command{Action: Undo, Identity: a}, person)
	exec(t, r, Command{Action: Undo, Identity: a}, person)
	if got := r.Changes(ctx, "f"); len(got) != 1 || !got[0].Identity.Equal(b) {
		t.Errorf("after undoing a: %+v", got)
	}
	if av.Load() != "a0" {
		t.Errorf("a = %v", av.Load())
	}
	if got[0].At.IsZero() || got[0].At.After(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("change time = %v", got[0].At)
	}
}
