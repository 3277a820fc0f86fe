package control

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// Upstream: "discovers serializable metadata and current state".
func TestDiscoversMetadataAndState(t *testing.T) {
	r := New(Config{})
	valid := true
	mustRegister(t, r, Registration{
		Identity: profile,
		Metadata: text("Display name"),
		Handles: Handles{
			GetValue: func(context.Context) (any, error) { return "Ada", nil },
			SetValue: func(context.Context, any) error { return nil },
			GetState: func(context.Context) (State, error) { return State{Valid: &valid}, nil },
		},
	})
	list := r.List(context.Background(), "profile")
	if len(list) != 1 {
		t.Fatalf("List(profile) has %d snapshots, want 1", len(list))
	}
	s := list[0]
	if !s.Identity.Equal(profile) {
		t.Errorf("identity = %v", s.Identity)
	}
	if s.Metadata.Kind != KindText || s.Metadata.Label != "Display name" {
		t.Errorf("metadata = %+v", s.Metadata)
	}
	for _, c := range []Capability{CapRead, CapStage, CapApply} {
		if !slices.Contains(s.Metadata.Capabilities, c) {
			t.Errorf("capabilities %v lack %s", s.Metadata.Capabilities, c)
		}
	}
	if s.State.Value != "Ada" || s.State.Valid == nil || !*s.State.Valid || s.State.ValueRedacted {
		t.Errorf("state = %+v", s.State)
	}
	if s.Metadata.Sensitivity != Public {
		t.Errorf("sensitivity = %q, want public by default", s.Metadata.Sensitivity)
	}
}

func TestListGetAndOrder(t *testing.T) {
	ctx := context.Background()
	r := New(Config{})
	ids := []Identity{
		{FormID: "b", ControlID: "z"},
		{FormID: "a", ControlID: "y"},
		{FormID: "b", ControlID: "x"},
		{FormID: "a", ControlID: "w", Subject: &Subject{Type: "row", ID: "1", Label: "One"}},
	}
	for _, id := range ids {
		mustRegister(t, r, Registration{Identity: id, Metadata: text(id.ControlID), Handles: NewValue(id.ControlID).Handles()})
	}
	controls := func(snaps []Snapshot) []string {
		var out []string
		for _, s := range snaps {
			out = append(out, s.Identity.ControlID)
		}
		return out
	}
	if got := controls(r.List(ctx, "")); !slices.Equal(got, []string{"z", "y", "x", "w"}) {
		t.Errorf("List(\"\") = %v, want registration order", got)
	}
	if got := controls(r.List(ctx, "b")); !slices.Equal(got, []string{"z", "x"}) {
		t.Errorf("List(b) = %v", got)
	}
	if got := r.List(ctx, "nope"); len(got) != 0 {
		t.Errorf("List(nope) = %v", got)
	}
	// Replacing keeps the place; removing drops it.
	mustRegister(t, r, Registration{Identity: ids[0], Metadata: text("again"), Handles: NewValue(1).Handles()})
	r.Unregister(ids[1])
	if got := controls(r.List(ctx, "")); !slices.Equal(got, []string{"z", "x", "w"}) {
		t.Errorf("after replace and unregister: %v", got)
	}
	// Get by exact identity; the subject label does not matter.
	if s, ok := r.Get(ctx, Identity{FormID: "a", ControlID: "w", Subject: &Subject{Type: "row", ID: "1", Label: "Other"}}); !ok || s.State.Value != "w" || s.Identity.Subject.Label != "One" {
		t.Errorf("Get with another label = %+v, %v", s, ok)
	}
	if _, ok := r.Get(ctx, Identity{FormID: "a", ControlID: "w"}); ok {
		t.Error("Get without the subject found the control registered with one")
	}
}

func TestOrderSurvivesCompaction(t *testing.T) {
	ctx := context.Background()
	r := New(Config{})
	var want []string
	for i := range 100 {
		id := Identity{FormID: "f", ControlID: string(rune('A'+i%26)) + strings.Repeat("x", i/26)}
		mustRegister(t, r, Registration{Identity: id, Metadata: text(""), Handles: NewValue(i).Handles()})
		if i%3 != 0 {
			r.Unregister(id)
		} else {
			want = append(want, id.ControlID)
		}
	}
	var got []string
	for _, s := range r.List(ctx, "f") {
		got = append(got, s.Identity.ControlID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if n := len(r.List(ctx, "")); n != len(want) {
		t.Errorf("List(\"\") has %d, want %d", n, len(want))
	}
}

func TestRegisterReplaceAndDispose(t *testing.T) {
	ctx := context.Background()
	r := New(Config{})
	first := mustRegister(t, r, Registration{Identity: profile, Metadata: text("First"), Handles: NewValue("a").Handles()})
	second := mustRegister(t, r, Registration{Identity: profile, Metadata: text("Second"), Handles: NewValue("b").Handles()})
	first() // the old disposer must not remove the new registration
	s, ok := r.Get(ctx, profile)
	if !ok || s.Metadata.Label != "Second" || s.State.Value != "b" {
		t.Fatalf("after old disposer: %+v, %v", s, ok)
	}
	second()
	if _, ok := r.Get(ctx, profile); ok {
		t.Fatal("disposer did not remove the control")
	}
	second() // twice is harmless
	third := mustRegister(t, r, Registration{Identity: profile, Metadata: text("Third"), Handles: NewValue("c").Handles()})
	second() // a disposer of an earlier registration never removes a later one
	if _, ok := r.Get(ctx, profile); !ok {
		t.Fatal("stale disposer removed a new registration")
	}
	third()
	if r.Unregister(profile) {
		t.Error("Unregister of an unknown identity reported a removal")
	}
}

func TestReplacementKeepsProposalAndHistory(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person), "")
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Hopper"}, agent), "")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("again"), Handles: v.Handles()})
	s, _ := r.Get(context.Background(), profile)
	if s.State.StagedValue != "Hopper" {
		t.Errorf("staged value after replacement = %v", s.State.StagedValue)
	}
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if v.Load() != "Ada" {
		t.Errorf("undo after replacement gave %v", v.Load())
	}
}

func TestBecomingSecretDropsProposal(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent), "")
	mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindPassword, Sensitivity: Secret}, Handles: v.Handles()})
	if got := r.Proposals(context.Background(), ""); len(got) != 0 {
		t.Errorf("a secret control holds a proposal: %+v", got[0].State)
	}
}

func TestRegisterRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		reg  Registration
		want Reason
	}{
		{"no kind", Registration{Identity: profile}, ReasonInvalidRequest},
		{"unknown kind", Registration{Identity: profile, Metadata: Metadata{Kind: "slider2"}}, ReasonInvalidRequest},
		{"unknown sensitivity", Registration{Identity: profile, Metadata: Metadata{Kind: KindText, Sensitivity: "Secret"}}, ReasonInvalidRequest},
		{"unknown capability", Registration{Identity: profile, Metadata: Metadata{Kind: KindText, Capabilities: []Capability{"fly"}}}, ReasonInvalidRequest},
		{"empty identity", Registration{Metadata: text("")}, ReasonInvalidRequest},
		{"long identity", Registration{Identity: Identity{FormID: strings.Repeat("f", 257), ControlID: "c"}, Metadata: text("")}, ReasonLimitExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			rec, stop := record(r)
			defer stop()
			dispose, err := r.Register(tt.reg)
			e, ok := err.(*Error)
			if !ok || e.Reason != tt.want || dispose != nil {
				t.Fatalf("Register = %v, %v; want reason %q", dispose != nil, err, tt.want)
			}
			if n := len(r.List(context.Background(), "")); n != 0 {
				t.Errorf("%d controls registered", n)
			}
			// An event for a later registration arrives first: none was
			// emitted for the rejected one.
			mustRegister(t, r, Registration{Identity: Identity{FormID: "x", ControlID: "y"}, Metadata: text("")})
			if evs := rec.wait(t, 1); evs[0].Identity.FormID != "x" {
				t.Errorf("first event = %+v", evs[0])
			}
		})
	}
}

func TestKindsAndActions(t *testing.T) {
	if n := len(Kinds()); n != 22 {
		t.Errorf("%d kinds, want 22", n)
	}
	for _, k := range Kinds() {
		if !k.Valid() {
			t.Errorf("kind %q not valid", k)
		}
	}
	if Kind("Text").Valid() {
		t.Error("kinds are case-sensitive")
	}
	if n := len(Actions()); n != 10 {
		t.Errorf("%d actions, want 10", n)
	}
	for _, a := range Actions() {
		if !a.Valid() || capBit(Capability(a)) == 0 {
			t.Errorf("action %q has no capability", a)
		}
	}
}

func TestRedaction(t *testing.T) {
	tests := []struct {
		name     string
		md       Metadata
		redacted bool
	}{
		{"public", Metadata{Kind: KindText, Sensitivity: Public}, false},
		{"default", Metadata{Kind: KindText}, false},
		{"personal", Metadata{Kind: KindText, Sensitivity: Personal}, false},
		{"sensitive", Metadata{Kind: KindText, Sensitivity: Sensitive}, false},
		{"secret", Metadata{Kind: KindPassword, Sensitivity: Secret}, true},
		{"not readable", Metadata{Kind: KindText, Readable: Bool(false)}, true},
		{"readable true", Metadata{Kind: KindText, Readable: Bool(true)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			sp := newSpy("hunter2")
			sp.setState(State{ValidationMessage: "hunter2 is too short"})
			mustRegister(t, r, Registration{Identity: profile, Metadata: tt.md, Handles: sp.handles()})
			if !tt.md.IsSecret() {
				wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "swordfish"}, agent), "")
			}
			s, _ := r.Get(context.Background(), profile)
			if s.State.ValueRedacted != tt.redacted {
				t.Fatalf("valueRedacted = %v", s.State.ValueRedacted)
			}
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			js := string(b)
			for _, secret := range []string{"hunter2", "swordfish"} {
				if got := strings.Contains(js, secret); got == tt.redacted {
					t.Errorf("JSON contains %q = %v: %s", secret, got, js)
				}
			}
			if !strings.Contains(js, `"valueRedacted":`) {
				t.Errorf("valueRedacted missing: %s", js)
			}
			if tt.redacted {
				if s.State.Value != nil || s.State.StagedValue != nil || s.State.ValidationMessage != "" {
					t.Errorf("redacted snapshot carries values: %+v", s.State)
				}
				if strings.Contains(js, `"value"`) || strings.Contains(js, `"stagedValue"`) {
					t.Errorf("redacted JSON has value keys: %s", js)
				}
			}
		})
	}
}

func TestSnapshotJSON(t *testing.T) {
	r := New(Config{Now: newClock().now})
	v := NewValue(nil)
	mustRegister(t, r, Registration{
		Identity: Identity{"profile", "plan", &Subject{Type: "user", ID: "42", Label: "Ada"}},
		Metadata: Metadata{Kind: KindSelect, Label: "Plan", Options: []Option{{Value: "free", Label: "Free"}}, Constraints: &Constraints{Required: true}},
		Handles:  v.Handles(),
	})
	id := Identity{"profile", "plan", &Subject{Type: "user", ID: "42"}}
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: id, Value: "free"}, agent), "")
	s, _ := r.Get(context.Background(), id)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	ident := m["identity"].(map[string]any)
	if ident["formId"] != "profile" || ident["controlId"] != "plan" || ident["subject"].(map[string]any)["label"] != "Ada" {
		t.Errorf("identity JSON = %v", ident)
	}
	st := m["state"].(map[string]any)
	for _, k := range []string{"value", "valueRedacted", "stagedValue", "stagedValueRedacted", "staged"} {
		if _, ok := st[k]; !ok {
			t.Errorf("state JSON lacks %q: %s", k, b)
		}
	}
	staged := st["staged"].(map[string]any)
	if staged["revision"] != 1.0 || staged["provenance"].(map[string]any)["principalId"] != "agent-7" || staged["stale"] != false {
		t.Errorf("staged JSON = %v", staged)
	}
	md := m["metadata"].(map[string]any)
	if md["kind"] != "select" || md["sensitivity"] != "public" || md["constraints"].(map[string]any)["required"] != true {
		t.Errorf("metadata JSON = %v", md)
	}
	// The JSON form decodes back into a Snapshot.
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil || back.State.Staged == nil || back.State.Staged.Revision != 1 {
		t.Errorf("round trip: %v %+v", err, back.State)
	}
}

func TestRegistrationIsCopied(t *testing.T) {
	r := New(Config{})
	md := Metadata{Kind: KindSelect, Options: []Option{{Value: "a", Label: "A"}}, Readable: Bool(true), Capabilities: []Capability{CapRead, CapStage}}
	id := Identity{FormID: "f", ControlID: "c", Subject: &Subject{Type: "row", ID: "1"}}
	mustRegister(t, r, Registration{Identity: id, Metadata: md, Handles: NewValue("a").Handles()})
	md.Options[0].Label = "changed by caller"
	md.Capabilities[0] = CapFocus
	*md.Readable = false
	id.Subject.ID = "2"
	s, ok := r.Get(context.Background(), Identity{FormID: "f", ControlID: "c", Subject: &Subject{Type: "row", ID: "1"}})
	if !ok || s.Metadata.Options[0].Label != "A" || s.Metadata.Capabilities[0] != CapRead || s.State.ValueRedacted || s.Identity.Subject.ID != "1" {
		t.Errorf("the caller's later changes reached the registry: %+v", s)
	}
}

func TestSnapshotsCannotChangeDecisions(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindText, Writable: Bool(true), Readable: Bool(true)}, Handles: v.Handles()})
	s, _ := r.Get(context.Background(), profile)
	// A careless reader scribbles on the shared metadata.
	*s.Metadata.Writable = false
	*s.Metadata.Readable = false
	for i := range s.Metadata.Capabilities {
		s.Metadata.Capabilities[i] = CapFocus
	}
	s.Identity.FormID = "elsewhere"
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person), "")
	if got, _ := r.Get(context.Background(), profile); got.State.ValueRedacted || got.State.Value != "Grace" || got.Identity.FormID != "profile" {
		t.Errorf("decisions followed a modified snapshot: %+v", got.State)
	}
}

func TestCapabilityDerivation(t *testing.T) {
	get := func(context.Context) (any, error) { return nil, nil }
	set := func(context.Context, any) error { return nil }
	clr := func(context.Context) error { return nil }
	act := func(context.Context) error { return nil }
	hl := func(context.Context, time.Duration) error { return nil }
	val := func(context.Context) (bool, error) { return true, nil }
	all := Handles{GetValue: get, SetValue: set, Clear: clr, Focus: act, Reveal: act, Highlight: hl, Validate: val}
	caps := func(cs ...Capability) []Capability { return cs }
	tests := []struct {
		name string
		md   Metadata
		h    Handles
		want []Capability
	}{
		{"no handles", text(""), Handles{}, caps(CapExplain)},
		{"read only", text(""), Handles{GetValue: get}, caps(CapExplain, CapRead)},
		{"not readable", Metadata{Kind: KindText, Readable: Bool(false)}, Handles{GetValue: get}, caps(CapExplain)},
		{"pointing", text(""), Handles{Focus: act, Reveal: act, Highlight: hl}, caps(CapExplain, CapFocus, CapReveal, CapHighlight)},
		{"validate", text(""), Handles{Validate: val}, caps(CapExplain, CapValidate)},
		{"setter", text(""), Handles{SetValue: set}, caps(CapExplain, CapStage, CapApply, CapUndo, CapClear, CapDiscard)},
		{"clear only", text(""), Handles{Clear: clr}, caps(CapExplain, CapClear)},
		{"not writable", Metadata{Kind: KindText, Writable: Bool(false)}, Handles{GetValue: get, SetValue: set, Clear: clr}, caps(CapExplain, CapRead)},
		{"everything", text(""), all, caps(CapExplain, CapRead, CapFocus, CapReveal, CapHighlight, CapValidate, CapStage, CapApply, CapUndo, CapClear, CapDiscard)},
		{"secret", Metadata{Kind: KindPassword, Sensitivity: Secret}, all, caps(CapExplain, CapFocus, CapReveal, CapHighlight, CapValidate)},
		{"declared replaces", Metadata{Kind: KindText, Capabilities: caps(CapRead, CapStage)}, all, caps(CapRead, CapStage)},
		{"declared empty", Metadata{Kind: KindText, Capabilities: []Capability{}}, all, []Capability{}},
		{"declared deduplicated", Metadata{Kind: KindText, Capabilities: caps(CapFocus, CapFocus)}, all, caps(CapFocus)},
		{"declared secret filtered", Metadata{Kind: KindText, Sensitivity: Secret, Capabilities: caps(CapRead, CapStage, CapApply, CapClear, CapUndo, CapFocus, CapExplain)}, all, caps(CapFocus, CapExplain)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			mustRegister(t, r, Registration{Identity: profile, Metadata: tt.md, Handles: tt.h})
			s, _ := r.Get(context.Background(), profile)
			if !slices.Equal(s.Metadata.Capabilities, tt.want) {
				t.Errorf("capabilities = %v, want %v", s.Metadata.Capabilities, tt.want)
			}
		})
	}
}

// TestPolicyMatrix covers the order of checks and the default policy for
// every action and source.
func TestPolicyMatrix(t *testing.T) {
	type setup struct {
		md    Metadata
		state State
	}
	plain := setup{md: text("")}
	secret := setup{md: Metadata{Kind: KindPassword, Sensitivity: Secret, Writable: Bool(false)}, state: State{Readonly: true}}
	notWritable := setup{md: Metadata{Kind: KindText, Writable: Bool(false)}, state: State{Disabled: true}}
	disabled := setup{md: text(""), state: State{Disabled: true}}
	readonly := setup{md: text(""), state: State{Readonly: true}}
	secretOnly := setup{md: Metadata{Kind: KindPassword, Sensitivity: Secret}}
	hidden := setup{md: Metadata{Kind: KindText, Readable: Bool(false)}}

	tests := []struct {
		name   string
		setup  setup
		action Action
		cc     CommandContext
		want   Reason
	}{
		{"secret beats not writable and readonly", secret, Stage, agent, ReasonSensitiveControl},
		{"secret apply by a person", secret, Apply, person, ReasonSensitiveControl},
		{"secret clear", secret, Clear, person, ReasonSensitiveControl},
		{"secret undo", secret, Undo, person, ReasonSensitiveControl},
		{"secret only: stage", secretOnly, Stage, person, ReasonSensitiveControl},
		{"not writable beats disabled", notWritable, Stage, agent, ReasonNotWritable},
		{"not writable apply", notWritable, Apply, person, ReasonNotWritable},
		{"disabled stage", disabled, Stage, agent, ReasonNotEditable},
		{"disabled apply", disabled, Apply, person, ReasonNotEditable},
		{"disabled clear", disabled, Clear, person, ReasonNotEditable},
		{"disabled undo", disabled, Undo, person, ReasonNotEditable},
		{"readonly stage", readonly, Stage, person, ReasonNotEditable},
		{"readonly apply", readonly, Apply, person, ReasonNotEditable},
		{"readonly clear", readonly, Clear, person, ReasonNotEditable},
		{"readonly undo", readonly, Undo, person, ReasonNotEditable},
		{"editable check beats the agent rule", disabled, Apply, agentOK, ReasonNotEditable},
		{"agent apply", plain, Apply, agent, ReasonHumanConfirmationRequired},
		{"agent apply confirmed", plain, Apply, agentOK, ReasonHumanConfirmationRequired},
		{"agent clear confirmed", plain, Clear, agentOK, ReasonHumanConfirmationRequired},
		{"agent undo confirmed", plain, Undo, agentOK, ReasonHumanConfirmationRequired},
		{"agent discard confirmed", plain, Discard, agentOK, ReasonHumanConfirmationRequired},
		{"agent stage", plain, Stage, agent, ""},
		{"agent stage on hidden control", hidden, Stage, agent, ""},
		{"agent focus on secret", secret, Focus, agent, ""},
		{"agent reveal on secret", secret, Reveal, agent, ""},
		{"agent highlight on secret", secret, Highlight, agent, ""},
		{"agent explain on secret", secret, Explain, agent, ""},
		{"agent validate on secret", secret, Validate, agent, ""},
		{"focus on disabled", disabled, Focus, agent, ""},
		{"voice apply unconfirmed", plain, Apply, unsureMe, ReasonConsentRequired},
		{"voice clear unconfirmed", plain, Clear, unsureMe, ReasonConsentRequired},
		{"voice undo unconfirmed", plain, Undo, unsureMe, ReasonConsentRequired},
		{"voice discard unconfirmed", plain, Discard, unsureMe, ReasonConsentRequired},
		{"tutorial apply unconfirmed", plain, Apply, CommandContext{Source: SourceTutorial}, ReasonConsentRequired},
		{"user apply unconfirmed", plain, Apply, CommandContext{Source: SourceUser, PrincipalID: "ada"}, ReasonConsentRequired},
		{"voice stage unconfirmed", plain, Stage, unsureMe, ""},
		{"voice apply confirmed", plain, Apply, CommandContext{Source: SourceVoice, Confirmed: true}, ""},
		{"test apply confirmed", plain, Apply, CommandContext{Source: SourceTest, Confirmed: true}, ""},
		{"default context apply", plain, Apply, defaults, ""},
		{"default context clear", plain, Clear, defaults, ""},
		{"default context undo", plain, Undo, defaults, ""},
		{"default context discard", plain, Discard, defaults, ""},
		{"discard while disabled", disabled, Discard, person, ReasonNotEditable},
		{"discard while readonly", readonly, Discard, person, ReasonNotEditable},
		{"discard on not writable", notWritable, Discard, person, ReasonNotWritable},
		{"discard on secret", secretOnly, Discard, person, ReasonSensitiveControl},
		{"agent discard on secret", secret, Discard, agentOK, ReasonSensitiveControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			sp := newSpy("Ada")
			mustRegister(t, r, Registration{Identity: profile, Metadata: tt.setup.md, Handles: sp.handles()})
			// Prepare history and a proposal directly, so that the
			// command under test can succeed when it is allowed.
			s := r.lookup(profile.Key())
			s.staged.Store(&staged{value: "Grace", base: "Ada", prop: Proposal{Revision: 1}})
			s.hist.push(undoEntry{action: Apply, previous: "Zed", applied: "Ada"}, 100)
			sp.setState(tt.setup.state)
			sets := sp.count("set") + sp.count("clear")
			res := exec(t, r, Command{Action: tt.action, Identity: profile, Value: nil, DurationMs: 400}, tt.cc)
			wantReason(t, res, tt.want)
			if res.Snapshot.IsZero() {
				t.Fatal("result has no snapshot")
			}
			if tt.want != "" && sp.count("set")+sp.count("clear") != sets {
				t.Errorf("a refused %s wrote to the control", tt.action)
			}
			if tt.want != "" && sp.get() != "Ada" {
				t.Errorf("value changed to %v", sp.get())
			}
		})
	}
}

func TestCheckOrder(t *testing.T) {
	r := New(Config{})
	// No handles: stage is unsupported, but policy runs first.
	mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindText, Writable: Bool(false)}})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "x"}, agent), ReasonNotWritable)
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("")})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "x"}, agent), ReasonUnsupported)
	// An agent's apply is refused before the missing capability shows.
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, agent), ReasonHumanConfirmationRequired)
	// not_found comes before everything, and carries no snapshot.
	res := exec(t, r, Command{Action: Apply, Identity: Identity{FormID: "profile", ControlID: "nope"}}, agent)
	wantReason(t, res, ReasonNotFound)
	if !res.Snapshot.IsZero() {
		t.Error("not_found carries a snapshot")
	}
	// Command shape comes first of all.
	wantReason(t, exec(t, r, Command{Action: "launch", Identity: Identity{FormID: "x", ControlID: "y"}}, agent), ReasonInvalidRequest)
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		name   string
		md     Metadata
		h      Handles
		action Action
	}{
		{"validate without handle", text(""), NewValue("a").Handles(), Validate},
		{"highlight without handle", text(""), NewValue("a").Handles(), Highlight},
		{"focus without handle", text(""), Handles{}, Focus},
		{"reveal without handle", text(""), Handles{}, Reveal},
		{"declared but no handle", Metadata{Kind: KindText, Capabilities: []Capability{CapFocus, CapApply, CapStage, CapUndo, CapClear}}, Handles{}, Focus},
		{"declared apply but no setter", Metadata{Kind: KindText, Capabilities: []Capability{CapApply}}, Handles{}, Apply},
		{"declared stage but no setter", Metadata{Kind: KindText, Capabilities: []Capability{CapStage}}, Handles{}, Stage},
		{"declared undo but no setter", Metadata{Kind: KindText, Capabilities: []Capability{CapUndo}}, Handles{}, Undo},
		{"declared clear but no handle", Metadata{Kind: KindText, Capabilities: []Capability{CapClear}}, Handles{}, Clear},
		{"explain left out of a declared list", Metadata{Kind: KindText, Capabilities: []Capability{CapRead}}, NewValue("a").Handles(), Explain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			mustRegister(t, r, Registration{Identity: profile, Metadata: tt.md, Handles: tt.h})
			wantReason(t, exec(t, r, Command{Action: tt.action, Identity: profile, Value: "v"}, defaults), ReasonUnsupported)
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	r := New(Config{})
	rec, stop := record(r)
	defer stop()
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: newSpy("a").handles()})
	tests := []struct {
		name string
		cmd  Command
		cc   CommandContext
	}{
		{"unknown action", Command{Action: "launch", Identity: profile}, person},
		{"read is not an action", Command{Action: "read", Identity: profile}, person},
		{"no action", Command{Identity: profile}, person},
		{"negative duration", Command{Action: Highlight, Identity: profile, DurationMs: -1}, person},
		{"duration too long", Command{Action: Highlight, Identity: profile, DurationMs: 60001}, person},
		{"negative revision", Command{Action: Apply, Identity: profile, Revision: -3}, person},
		{"unknown source", Command{Action: Focus, Identity: profile}, CommandContext{Source: "robot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := exec(t, r, tt.cmd, tt.cc)
			wantReason(t, res, ReasonInvalidRequest)
			if !res.Snapshot.IsZero() {
				t.Error("invalid_request carries a snapshot")
			}
		})
	}
	// Any unregistered identity is not_found, however it looks.
	for _, id := range []Identity{{}, {FormID: "profile", ControlID: "display-name\n"}, {FormID: strings.Repeat("p", 257), ControlID: "c"}} {
		wantReason(t, exec(t, r, Command{Action: Focus, Identity: id}, person), ReasonNotFound)
	}
	wantReason(t, exec(t, r, Command{Action: Highlight, Identity: profile, DurationMs: 60000}, person), "")
	// Only the registered event and the last highlight were emitted.
	evs := rec.wait(t, 2)
	if evs[0].Type != EventRegistered || evs[1].Type != EventCommand || evs[1].Command.Action != Highlight || !evs[1].Result.OK {
		t.Errorf("events = %+v", evs)
	}
}

func TestPointingHandles(t *testing.T) {
	r := New(Config{})
	sp := newSpy(nil)
	h := sp.handles()
	h.GetValue, h.SetValue, h.Clear = nil, nil, nil
	mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindCustom}, Handles: h})
	wantReason(t, exec(t, r, Command{Action: Focus, Identity: profile}, defaults), "")
	wantReason(t, exec(t, r, Command{Action: Reveal, Identity: profile}, defaults), "")
	wantReason(t, exec(t, r, Command{Action: Highlight, Identity: profile, DurationMs: 400}, defaults), "")
	if sp.count("focus") != 1 || sp.count("reveal") != 1 || sp.count("highlight") != 1 {
		t.Errorf("calls = %v", sp.calls)
	}
	if sp.highlight != 400*time.Millisecond {
		t.Errorf("highlight duration = %v, want 400ms", sp.highlight)
	}
	wantReason(t, exec(t, r, Command{Action: Highlight, Identity: profile}, defaults), "")
	if sp.highlight != 0 {
		t.Errorf("highlight without durationMs = %v, want 0 (the control's default)", sp.highlight)
	}
	// validate calls the handle and ignores its boolean.
	wantReason(t, exec(t, r, Command{Action: Validate, Identity: profile}, agent), "")
	if sp.count("validate") != 1 {
		t.Error("validate handle not called")
	}
	// explain has no side effect and returns the snapshot.
	before := sp.count("focus") + sp.count("reveal") + sp.count("highlight") + sp.count("validate")
	res := exec(t, r, Command{Action: Explain, Identity: profile}, agent)
	wantReason(t, res, "")
	if res.Snapshot.IsZero() || res.Snapshot.Metadata.Kind != KindCustom {
		t.Errorf("explain snapshot = %+v", res.Snapshot)
	}
	if after := sp.count("focus") + sp.count("reveal") + sp.count("highlight") + sp.count("validate"); after != before {
		t.Error("explain called a handle")
	}
}

func TestStageApplyClear(t *testing.T) {
	ctx := context.Background()
	r := New(Config{})
	sp := newSpy("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: sp.handles()})

	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, person), ReasonNoStagedValue)
	res := exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent)
	wantReason(t, res, "")
	if sp.count("set") != 0 {
		t.Fatal("stage called the writer")
	}
	if res.Snapshot.State.Value != "Ada" || res.Snapshot.State.StagedValue != "Grace" {
		t.Errorf("after stage: %+v", res.Snapshot.State)
	}
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Hopper"}, agent), "")
	if s, _ := r.Get(ctx, profile); s.State.StagedValue != "Hopper" || s.State.Staged.Revision != 2 {
		t.Errorf("second stage did not overwrite: %+v", s.State)
	}
	res = exec(t, r, Command{Action: Apply, Identity: profile}, person)
	wantReason(t, res, "")
	if sp.get() != "Hopper" || res.Snapshot.State.Staged != nil || res.Snapshot.State.StagedValue != nil {
		t.Errorf("apply of staged value: value %v, state %+v", sp.get(), res.Snapshot.State)
	}
	// A supplied value wins over the staged one and clears it.
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Lovelace"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Byron"}, person), "")
	if s, _ := r.Get(ctx, profile); sp.get() != "Byron" || s.State.Staged != nil {
		t.Errorf("apply with value: %v %+v", sp.get(), s.State)
	}
	// Clear uses the Clear handle and drops a proposal.
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "x"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Clear, Identity: profile}, person), "")
	if s, _ := r.Get(ctx, profile); sp.count("clear") != 1 || sp.get() != "" || s.State.Staged != nil {
		t.Errorf("clear: calls %v value %q staged %+v", sp.calls, sp.get(), s.State.Staged)
	}
	// Undo walks back in LIFO order: clear, apply Byron, apply Hopper.
	for _, want := range []string{"Byron", "Hopper", "Ada"} {
		wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
		if sp.get() != want {
			t.Fatalf("undo restored %v, want %v", sp.get(), want)
		}
	}
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonNothingToUndo)
}

func TestClearWithoutClearHandle(t *testing.T) {
	r := New(Config{})
	sp := newSpy("Ada")
	h := sp.handles()
	h.Clear = nil
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: h})
	wantReason(t, exec(t, r, Command{Action: Clear, Identity: profile}, person), "")
	if sp.get() != "" || sp.count("set") != 1 {
		t.Errorf("clear via setter: value %q calls %v", sp.get(), sp.calls)
	}
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if sp.get() != "Ada" {
		t.Errorf("undo of clear gave %v", sp.get())
	}
}

func TestStageNilAndApplyIt(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, person), "")
	if v.Load() != nil {
		t.Errorf("applying a staged nil gave %v", v.Load())
	}
}

// Upstream: "stages without mutation, requires agent consent to apply, and
// supports undo", with the 0.42.4 agent rule.
func TestAgentStagesPersonApplies(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("Display name"), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent), "")
	if v.Load() != "Ada" {
		t.Fatal("stage changed the value")
	}
	if s, _ := r.Get(context.Background(), profile); s.State.StagedValue != "Grace" {
		t.Fatalf("staged value = %v", s.State.StagedValue)
	}
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, agent), ReasonHumanConfirmationRequired)
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Revision: 1}, agentOK), ReasonHumanConfirmationRequired)
	if v.Load() != "Ada" {
		t.Fatal("an agent's apply changed the value")
	}
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, person), "")
	if v.Load() != "Grace" {
		t.Fatalf("value = %v after the person's apply", v.Load())
	}
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, agentOK), ReasonHumanConfirmationRequired)
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if v.Load() != "Ada" {
		t.Fatalf("undo gave %v", v.Load())
	}
}

// Upstream: "stages with provenance without mutation and only lets a human
// apply".
func TestProvenance(t *testing.T) {
	c := newClock()
	r := New(Config{Now: c.now})
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: NewValue("Ada").Handles()})
	res := exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent)
	wantReason(t, res, "")
	p := res.Snapshot.State.Staged
	want := Proposal{Revision: 1, Provenance: Provenance{Source: SourceAgent, PrincipalID: "agent-7", SessionID: "session-9"}, StagedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
	if p == nil || *p != want {
		t.Fatalf("staged = %+v, want %+v", p, want)
	}
	if res.Snapshot.State.Value != "Ada" || res.Snapshot.State.StagedValue != "Grace" {
		t.Errorf("state = %+v", res.Snapshot.State)
	}
}

// Upstream: "detects stale revisions and competing direct edits without
// losing the proposal".
func TestStaleRevisionAndCompetingEdit(t *testing.T) {
	ctx := context.Background()
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Revision: 9}, person), ReasonStaleRevision)
	v.Store("Katherine") // a person edits the control directly
	s, _ := r.Get(ctx, profile)
	if !s.State.Staged.Stale {
		t.Fatal("proposal not marked stale after a direct edit")
	}
	res := exec(t, r, Command{Action: Apply, Identity: profile, Revision: 1}, person)
	wantReason(t, res, ReasonStagedValueStale)
	if v.Load() != "Katherine" || res.Snapshot.State.StagedValue != "Grace" || !res.Snapshot.State.Staged.Stale {
		t.Fatalf("stale apply: value %v, state %+v", v.Load(), res.Snapshot.State)
	}
	// The edit going back makes the proposal fresh again.
	v.Store("Ada")
	if s, _ := r.Get(ctx, profile); s.State.Staged.Stale {
		t.Error("proposal still stale after the value returned")
	}
	v.Store("Katherine")
	wantReason(t, exec(t, r, Command{Action: Discard, Identity: profile, Revision: 2}, person), ReasonStaleRevision)
	wantReason(t, exec(t, r, Command{Action: Discard, Identity: profile, Revision: 1}, person), "")
	if s, _ := r.Get(ctx, profile); s.State.Staged != nil {
		t.Errorf("discard left %+v", s.State.Staged)
	}
	wantReason(t, exec(t, r, Command{Action: Discard, Identity: profile}, person), ReasonNoStagedValue)
	wantReason(t, exec(t, r, Command{Action: Discard, Identity: profile, Revision: 1}, person), ReasonStaleRevision)
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Revision: 1, Value: "x"}, person), ReasonStaleRevision)
	// Restaging after a competing edit bases the proposal on the new value.
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Revision: 2}, person), "")
	if v.Load() != "Grace" {
		t.Errorf("value = %v", v.Load())
	}
}

func TestRevisionsIncreaseAcrossControls(t *testing.T) {
	r := New(Config{})
	a, b := Identity{FormID: "f", ControlID: "a"}, Identity{FormID: "f", ControlID: "b"}
	mustRegister(t, r, Registration{Identity: a, Metadata: text(""), Handles: NewValue("").Handles()})
	mustRegister(t, r, Registration{Identity: b, Metadata: text(""), Handles: NewValue("").Handles()})
	var revs []int64
	for _, id := range []Identity{a, b, a, b} {
		res := exec(t, r, Command{Action: Stage, Identity: id, Value: "x"}, agent)
		revs = append(revs, res.Snapshot.State.Staged.Revision)
	}
	if !slices.Equal(revs, []int64{1, 2, 3, 4}) {
		t.Errorf("revisions = %v", revs)
	}
	// A control registered again after removal never sees an old revision.
	r.Unregister(a)
	mustRegister(t, r, Registration{Identity: a, Metadata: text(""), Handles: NewValue("").Handles()})
	if res := exec(t, r, Command{Action: Stage, Identity: a, Value: "x"}, agent); res.Snapshot.State.Staged.Revision != 5 {
		t.Errorf("revision after re-registration = %d", res.Snapshot.State.Staged.Revision)
	}
}

func TestUndoRefusesToOverwriteAnEdit(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()})
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person), "")
	v.Store("Kate")
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonStagedValueStale)
	if v.Load() != "Kate" {
		t.Fatalf("undo overwrote the edit: %v", v.Load())
	}
	if ch := r.Changes(context.Background(), ""); len(ch) != 1 || !ch[0].Stale {
		t.Errorf("changes = %+v", ch)
	}
	v.Store("Grace")
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if v.Load() != "Ada" {
		t.Errorf("undo gave %v", v.Load())
	}
}

func TestUndoRecordsNormalizedValue(t *testing.T) {
	r := New(Config{})
	var held any = 1.0
	h := Handles{
		GetValue: func(context.Context) (any, error) { return held, nil },
		SetValue: func(_ context.Context, v any) error {
			if s, ok := v.(string); ok && s == "42" {
				v = 42.0
			}
			held = v
			return nil
		},
	}
	// A custom control takes any value and normalizes what it is given.
	mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindCustom}, Handles: h})
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "42"}, person), "")
	if held != 42.0 {
		t.Fatalf("held = %v", held)
	}
	// The history holds 42, not "42", so undo does not think it stale.
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if held != 1.0 {
		t.Errorf("undo gave %v", held)
	}
}

func TestHistoryDepth(t *testing.T) {
	tests := []struct {
		name   string
		depth  int
		undos  int // successful undos after 6 applies
		finalV int
	}{
		{"bounded", 3, 3, 3},
		{"one", 1, 1, 5},
		{"default", 0, 6, 0},
		{"disabled", -1, 0, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{HistoryDepth: tt.depth})
			v := NewValue(0)
			mustRegister(t, r, Registration{Identity: profile, Metadata: Metadata{Kind: KindNumber}, Handles: v.Handles()})
			for i := 1; i <= 6; i++ {
				wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: i}, person), "")
			}
			for range tt.undos {
				wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
			}
			wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonNothingToUndo)
			if v.Load() != tt.finalV {
				t.Errorf("value = %v, want %d", v.Load(), tt.finalV)
			}
		})
	}
}

func TestHistoryRingWrapsAndRefills(t *testing.T) {
	var h history
	for i := range 7 {
		h.push(undoEntry{applied: i}, 4)
	}
	h.pop()
	h.pop()
	h.push(undoEntry{applied: 100}, 4)
	var got []any
	for h.n > 0 {
		e, _ := h.top()
		got = append(got, e.applied)
		h.pop()
	}
	if !slices.Equal(got, []any{100, 4, 3}) {
		t.Errorf("history = %v", got)
	}
	if _, ok := h.top(); ok {
		t.Error("empty history has a top")
	}
	h.pop() // harmless on empty
}

func TestUnregisterDropsHistoryAndProposal(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	reg := Registration{Identity: profile, Metadata: text(""), Handles: v.Handles()}
	dispose := mustRegister(t, r, reg)
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person), "")
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Hopper"}, agent), "")
	dispose()
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonNotFound)
	mustRegister(t, r, reg)
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonNothingToUndo)
	if s, _ := r.Get(context.Background(), profile); s.State.Staged != nil {
		t.Error("proposal survived unregister")
	}
}

func TestHandleErrors(t *testing.T) {
	tests := []struct {
		name     string
		md       Metadata
		prepare  func(*spy)
		cmd      Command
		leakText bool // the error text may appear in the message
	}{
		{"setter error", text(""), func(s *spy) { s.setErr = errBoom }, Command{Action: Apply, Value: "x"}, true},
		{"getter error", text(""), func(s *spy) { s.getErr = errBoom }, Command{Action: Explain}, true},
		{"state error", text(""), func(s *spy) { s.stateErr = errBoom }, Command{Action: Stage, Value: "x"}, true},
		{"setter panic", text(""), func(s *spy) { s.panicOn = "set" }, Command{Action: Apply, Value: "x"}, true},
		{"focus panic", text(""), func(s *spy) { s.panicOn = "focus" }, Command{Action: Focus}, true},
		{"redacted setter error", Metadata{Kind: KindText, Readable: Bool(false)}, func(s *spy) { s.setErr = errBoom }, Command{Action: Apply, Value: "x"}, false},
		{"redacted getter error", Metadata{Kind: KindText, Readable: Bool(false)}, func(s *spy) { s.getErr = errBoom }, Command{Action: Stage, Value: "x"}, false},
		{"secret state error", Metadata{Kind: KindPassword, Sensitivity: Secret}, func(s *spy) { s.stateErr = errBoom }, Command{Action: Explain}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			rec, stop := record(r)
			defer stop()
			sp := newSpy("Ada")
			mustRegister(t, r, Registration{Identity: profile, Metadata: tt.md, Handles: sp.handles()})
			tt.prepare(sp)
			tt.cmd.Identity = profile
			res := exec(t, r, tt.cmd, person)
			wantReason(t, res, ReasonCommandFailed)
			if res.Snapshot.IsZero() {
				t.Error("failure has no snapshot")
			}
			leaked := strings.Contains(res.Message, "hunter2") || strings.Contains(res.Message, "boom")
			if leaked != tt.leakText {
				t.Errorf("message %q: error text shown = %v, want %v", res.Message, leaked, tt.leakText)
			}
			evs := rec.wait(t, 2)
			if evs[1].Type != EventCommand || evs[1].Result.Reason != ReasonCommandFailed {
				t.Errorf("event = %+v", evs[1])
			}
			if tt.cmd.Action == Apply && sp.get() != "Ada" {
				t.Errorf("value = %v", sp.get())
			}
		})
	}
}

func TestFailedApplyKeepsProposal(t *testing.T) {
	r := New(Config{})
	sp := newSpy("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: sp.handles()})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Grace"}, agent), "")
	sp.mu.Lock()
	sp.setErr = errBoom
	sp.mu.Unlock()
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile}, person), ReasonCommandFailed)
	s, _ := r.Get(context.Background(), profile)
	if s.State.StagedValue != "Grace" {
		t.Error("a failed apply dropped the proposal")
	}
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonNothingToUndo)
}

func TestListToleratesFailingHandles(t *testing.T) {
	r := New(Config{})
	sp := newSpy("Ada")
	sp.getErr = errBoom
	sp.stateErr = errBoom
	sp.state = State{Disabled: true}
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: sp.handles()})
	list := r.List(context.Background(), "")
	if len(list) != 1 || !list[0].State.ValueRedacted || list[0].State.Value != nil || list[0].State.Disabled {
		t.Errorf("list = %+v", list)
	}
}

func TestCustomPolicy(t *testing.T) {
	var seen []Command
	policy := func(_ context.Context, cmd Command, cc CommandContext, snap Snapshot) Decision {
		seen = append(seen, cmd)
		switch {
		case cmd.Action == Highlight:
			return Decision{Allowed: false}
		case cmd.Action == Stage && cmd.Value == "forbidden":
			return Decision{Reason: "over_budget", Message: "the plan is over budget"}
		case cmd.Action == Reveal:
			panic("policy bug")
		}
		return Decision{Allowed: true} // an allow-all policy cannot loosen the default
	}
	r := New(Config{Policy: policy})
	sp := newSpy("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: sp.handles()})
	secret := Identity{FormID: "profile", ControlID: "api-key"}
	mustRegister(t, r, Registration{Identity: secret, Metadata: Metadata{Kind: KindPassword, Sensitivity: Secret}, Handles: newSpy("k").handles()})
	hidden := Identity{FormID: "profile", ControlID: "hidden"}
	mustRegister(t, r, Registration{Identity: hidden, Metadata: Metadata{Kind: KindText, Readable: Bool(false)}, Handles: newSpy("h").handles()})

	wantReason(t, exec(t, r, Command{Action: Highlight, Identity: profile}, person), ReasonDenied)
	res := exec(t, r, Command{Action: Stage, Identity: profile, Value: "forbidden"}, person)
	wantReason(t, res, "over_budget")
	if res.Message != "the plan is over budget" {
		t.Errorf("message = %q", res.Message)
	}
	wantReason(t, exec(t, r, Command{Action: Reveal, Identity: profile}, person), ReasonCommandFailed)
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "x"}, agentOK), ReasonHumanConfirmationRequired)
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: secret, Value: "x"}, person), ReasonSensitiveControl)
	n := len(seen)
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: hidden, Value: "private"}, person), "")
	if len(seen) != n+1 || seen[n].Value != nil {
		t.Errorf("policy saw the value of a redacted control: %+v", seen[n:])
	}
	wantReason(t, exec(t, r, Command{Action: Focus, Identity: profile}, person), "")
	if sp.get() != "Ada" {
		t.Error("value changed")
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	r := New(Config{})
	entered := make(chan struct{})
	release := make(chan struct{})
	v := NewValue("Ada")
	h := v.Handles()
	h.SetValue = func(ctx context.Context, x any) error {
		close(entered)
		<-release
		return v.Set(ctx, x)
	}
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: h})
	done := make(chan Result)
	go func() { done <- exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Execute(ctx, Command{Action: Stage, Identity: profile, Value: "Hopper"}, agent)
	wantReason(t, res, ReasonCommandFailed)
	// Non-mutations do not wait for the running mutation.
	wantReason(t, exec(t, r, Command{Action: Explain, Identity: profile}, agent), "")
	close(release)
	wantReason(t, <-done, "")
	if v.Load() != "Grace" {
		t.Errorf("value = %v", v.Load())
	}
}

func TestUnregisterWhileWaiting(t *testing.T) {
	r := New(Config{})
	entered := make(chan struct{})
	release := make(chan struct{})
	v := NewValue("Ada")
	h := v.Handles()
	h.SetValue = func(ctx context.Context, x any) error {
		close(entered)
		<-release
		return v.Set(ctx, x)
	}
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: h})
	first := make(chan Result)
	go func() { first <- exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person) }()
	<-entered
	second := make(chan Result)
	go func() { second <- exec(t, r, Command{Action: Apply, Identity: profile, Value: "Hopper"}, person) }()
	r.Unregister(profile)
	close(release)
	wantReason(t, <-first, "")
	wantReason(t, <-second, ReasonNotFound)
}

// Upstream: "keeps staged and undo state when clear or undo is rejected".
func TestFailedClearAndUndoKeepState(t *testing.T) {
	r := New(Config{})
	sp := newSpy("Ada")
	h := sp.handles()
	h.Clear = nil // clear goes through the failing setter
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: h})
	wantReason(t, exec(t, r, Command{Action: Apply, Identity: profile, Value: "Grace"}, person), "")
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "Hopper"}, agent), "")
	sp.mu.Lock()
	sp.setErr = errBoom
	sp.mu.Unlock()
	wantReason(t, exec(t, r, Command{Action: Clear, Identity: profile}, person), ReasonCommandFailed)
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), ReasonCommandFailed)
	s, _ := r.Get(context.Background(), profile)
	if s.State.StagedValue != "Hopper" || s.State.Value != "Grace" {
		t.Errorf("state after failures = %+v", s.State)
	}
	if ch := r.Changes(context.Background(), ""); len(ch) != 1 || ch[0].Depth != 1 {
		t.Errorf("history after failures = %+v", ch)
	}
	sp.mu.Lock()
	sp.setErr = nil
	sp.mu.Unlock()
	wantReason(t, exec(t, r, Command{Action: Undo, Identity: profile}, person), "")
	if sp.get() != "Ada" {
		t.Errorf("undo after recovery gave %v", sp.get())
	}
}

func TestResultJSON(t *testing.T) {
	r := New(Config{})
	mustRegister(t, r, Registration{Identity: profile, Metadata: text(""), Handles: NewValue("Ada").Handles()})
	tests := []struct {
		name         string
		cmd          Command
		cc           CommandContext
		wantSnapshot bool
		wantReason   bool
	}{
		{"success", Command{Action: Explain, Identity: profile}, agent, true, false},
		{"refusal", Command{Action: Apply, Identity: profile}, agent, true, true},
		{"not found", Command{Action: Explain, Identity: Identity{FormID: "x", ControlID: "y"}}, agent, false, true},
		{"invalid", Command{Action: "fly", Identity: profile}, agent, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(exec(t, r, tt.cmd, tt.cc))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			_, snap := m["snapshot"]
			_, reason := m["reason"]
			if snap != tt.wantSnapshot || reason != tt.wantReason || m["action"] != string(tt.cmd.Action) {
				t.Errorf("result JSON = %s", b)
			}
			if id, ok := m["identity"].(map[string]any); !ok || id["formId"] != tt.cmd.Identity.FormID {
				t.Errorf("identity JSON = %s", b)
			}
		})
	}
}
