package flow

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func known(v string) Fact { return Fact{Status: StatusKnown, Value: v} }

func agent(grants ...string) Principal {
	return Principal{ID: "agent-1", Kind: AuthorityAgent, Grants: grants}
}

func person(grants ...string) Principal {
	return Principal{ID: "alice", Kind: AuthorityHuman, Grants: grants}
}

// newOrder is an instance of full.json in phase new, ready to reserve.
func newOrder(p *Program) Instance {
	return Instance{
		ID: "order-1", Program: p.Fingerprint(), Phase: "new", Objective: "shipped",
		Facts: map[string]Fact{"payment.status": known("captured"), "stock.level": known("12")},
	}
}

func reasonCode(d Decision, local string) string {
	for _, r := range d.Reasons {
		if LocalID(r.Transition) == local {
			return r.Code
		}
	}
	return ""
}

func TestResolveLaw(t *testing.T) {
	base := fullProgram(t)
	p := mustLoad(t, base)
	inv := testInventory()
	policyAgent := agent(CapabilityStateWrite)
	policyAgent.Policy = true
	params := map[string]string{"warehouse": "north"}

	tests := []struct {
		name     string
		prog     *Program
		inst     func(in *Instance)
		pr       Principal
		req      Request
		kind     Kind
		trans    string // local id
		awaiting string
		code     string
		reasons  map[string]string // local id → reason code
	}{
		{name: "prescribed", pr: policyAgent, req: Request{Parameters: params}, kind: Prescribed, trans: "reserve",
			reasons: map[string]string{"release": ReasonSourceCondition, "escalate": ReasonSourcePhase, "ship": ReasonSourcePhase,
				"rebuild-index": ReasonSourcePhase, "cancel": ReasonExplicitOnly, "delivered": ReasonObservedOnly}},
		{name: "missing authority class", pr: agent(CapabilityStateWrite), req: Request{Parameters: params}, kind: Frontier, trans: "reserve", awaiting: AuthorityPolicy},
		{name: "missing parameters", pr: policyAgent, kind: Frontier, trans: "reserve", awaiting: AwaitingParameters},
		{name: "unknown parameter", pr: policyAgent, req: Request{Parameters: map[string]string{"warehouse": "n", "colour": "red"}}, kind: Refused, code: CodeParameterUnknown},
		{name: "capability denied", pr: func() Principal { a := agent(); a.Policy = true; return a }(), req: Request{Parameters: params}, kind: Refused, code: CodeCapabilityDenied},
		{name: "human authority for an agent", pr: agent(CapabilityStateWrite, CapabilityHumanApprove), req: Request{Transition: "cancel"}, kind: Frontier, trans: "cancel", awaiting: AuthorityHuman},
		{name: "human.approve not granted to a person", pr: person(CapabilityStateWrite), req: Request{Transition: "cancel"}, kind: Frontier, trans: "cancel", awaiting: AuthorityHuman},
		{name: "person with human.approve", pr: person(CapabilityStateWrite, CapabilityHumanApprove), req: Request{Transition: "cancel"}, kind: Prescribed, trans: "cancel",
			reasons: map[string]string{"reserve": ReasonNotRequested, "delivered": ReasonNotRequested}},
		{name: "marked", inst: func(in *Instance) { in.Phase = "shipped"; in.Facts["carrier.label"] = known("L1") }, pr: policyAgent, kind: Marked,
			reasons: map[string]string{"rebuild-index": ReasonObjectiveMet, "reserve": ReasonSourcePhase}},
		{name: "marked but requested", inst: func(in *Instance) { in.Phase = "shipped"; in.Facts["carrier.label"] = known("L1") },
			pr: Principal{ID: "svc", Kind: AuthorityService, Grants: []string{CapabilityCommandExecute}}, req: Request{Transition: "rebuild-index"}, kind: Prescribed, trans: "rebuild-index"},
		{name: "blocked", inst: func(in *Instance) { delete(in.Facts, "payment.status") }, pr: policyAgent, kind: Blocked,
			reasons: map[string]string{"reserve": ReasonSourceCondition, "release": ReasonSourceCondition}},
		{name: "already satisfied", inst: func(in *Instance) {
			in.Phase, in.Objective = "shipped", ""
			in.Facts["run.rebuild-index"] = known("succeeded")
		}, pr: policyAgent, kind: Blocked, reasons: map[string]string{"rebuild-index": ReasonAlreadySatisfied}},
		{name: "objective scope", inst: func(in *Instance) { in.Objective = "" }, pr: policyAgent, req: Request{Parameters: params}, kind: Blocked,
			reasons: map[string]string{"reserve": ReasonObjectiveScope}},
		{name: "objective bound by request", inst: func(in *Instance) { in.Objective = "" }, pr: policyAgent, req: Request{Objective: "cancelled", Parameters: params}, kind: Prescribed, trans: "reserve"},
		{name: "objective conflict", pr: policyAgent, req: Request{Objective: "cancelled"}, kind: Refused, code: CodeObjectiveConflict},
		{name: "unknown objective", inst: func(in *Instance) { in.Objective = "refunded" }, pr: policyAgent, kind: Refused, code: CodeObjectiveUnknown},
		{name: "unknown transition", pr: policyAgent, req: Request{Transition: "teleport"}, kind: Refused, code: CodeTransitionUnknown},
		{name: "observed transition", pr: policyAgent, req: Request{Transition: "order-fulfilment/delivered"}, kind: Refused, code: CodeTransitionObserved},
		{name: "requested transition does not apply", pr: policyAgent, req: Request{Transition: "ship"}, kind: Refused, code: CodeTransitionInapplicable, trans: "ship"},
		{name: "drift", inst: func(in *Instance) { in.Program = "sha256:" + strings.Repeat("0", 64) }, pr: policyAgent, kind: Unresolved, code: CodeProgramDrift},
		{name: "recovery mode", inst: func(in *Instance) {
			in.Phase = "reserved"
			in.Facts["stock.reserved"] = Fact{Status: StatusUnknown}
			in.Recovery = &RecoveryMark{Transition: "order-fulfilment/ship", Prescription: "prx-x", Cause: "timeout"}
		}, pr: agent(CapabilityStateWrite), kind: Prescribed, trans: "release",
			reasons: map[string]string{"ship": ReasonRecoveryMode, "reserve": ReasonRecoveryMode, "escalate": ReasonSourceCondition}},
		{name: "recovery mode refuses a requested non-recovery transition", inst: func(in *Instance) {
			in.Phase = "reserved"
			in.Recovery = &RecoveryMark{Transition: "order-fulfilment/ship", Prescription: "prx-x", Cause: "timeout"}
		}, pr: agent(CapabilityToolInvoke), req: Request{Transition: "ship", Parameters: map[string]string{"api_key": "k"}}, kind: Refused, code: CodeTransitionInapplicable},
		{name: "tie", prog: mustLoad(t, variant(t, base, func(m doc) {
			set(m, "transitions.4.source_phases", []any{"new"})
			set(m, "transitions.4.priority", 2)
		})), pr: policyAgent, kind: Frontier, awaiting: AwaitingChoice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := p
			if tt.prog != nil {
				prog = tt.prog
			}
			in := newOrder(prog)
			if tt.inst != nil {
				tt.inst(&in)
			}
			d := Resolve(prog, inv, &in, &tt.pr, tt.req, t0)
			if d.Kind != tt.kind || d.Code != tt.code || d.Awaiting != tt.awaiting {
				t.Fatalf("decision = %s/%s/%s (%s), want %s/%s/%s", d.Kind, d.Code, d.Awaiting, d.Message, tt.kind, tt.code, tt.awaiting)
			}
			if tt.trans != "" && d.Transition != prog.ID()+"/"+tt.trans {
				t.Errorf("transition = %s, want %s", d.Transition, tt.trans)
			}
			for local, code := range tt.reasons {
				if got := reasonCode(d, local); got != code {
					t.Errorf("reason for %s = %q, want %q", local, got, code)
				}
			}
			if (d.Kind == Prescribed) != (d.Prescription != nil) {
				t.Errorf("prescription presence does not match kind %s", d.Kind)
			}
			// A reason for every transition not chosen.
			if d.Kind != Unresolved && d.Kind != Refused || d.Code == CodeTransitionInapplicable {
				covered := len(d.Reasons)
				switch d.Kind {
				case Prescribed, Frontier:
					if d.Awaiting == AwaitingChoice {
						covered += len(d.Candidates)
					} else {
						covered++
					}
				case Refused:
					covered++
				}
				if d.Kind != Refused && covered != prog.Len() {
					t.Errorf("%d reasons and %d chosen for %d transitions: %+v", len(d.Reasons), covered-len(d.Reasons), prog.Len(), d.Reasons)
				}
			}
		})
	}
}

func TestResolveTieListsCandidates(t *testing.T) {
	base := fullProgram(t)
	p := mustLoad(t, variant(t, base, func(m doc) {
		set(m, "transitions.4.source_phases", []any{"new"})
		set(m, "transitions.4.priority", 2)
	}))
	in := newOrder(p)
	pr := agent()
	d := Resolve(p, testInventory(), &in, &pr, Request{}, t0)
	want := []string{"order-fulfilment/rebuild-index", "order-fulfilment/reserve"}
	if d.Kind != Frontier || !slices.Equal(d.Candidates, want) || d.Transition != "" {
		t.Errorf("decision = %s %v %q, want FRONTIER on %v", d.Kind, d.Candidates, d.Transition, want)
	}
}

func TestPrescriptionBinding(t *testing.T) {
	p := mustLoad(t, fullProgram(t))
	inv := testInventory()
	in := newOrder(p)
	in.Phase = "reserved"
	pr := agent(CapabilityToolInvoke, CapabilityStateWrite, CapabilityHumanApprove, CapabilityCommandExecute)
	req := Request{Parameters: map[string]string{"api_key": "s3cr3t"}}
	d := Resolve(p, inv, &in, &pr, req, t0)
	if d.Kind != Prescribed {
		t.Fatalf("decision = %s: %s", d.Kind, d.Message)
	}
	rx := d.Prescription
	if !slices.Equal(rx.EffectiveCapabilities, []string{CapabilityToolInvoke}) || !slices.Equal(rx.RequiredCapabilities, rx.EffectiveCapabilities) {
		t.Errorf("effective = %v, required = %v; want exactly [tool.invoke]", rx.EffectiveCapabilities, rx.RequiredCapabilities)
	}
	if v := rx.Parameters["api_key"]; v == "s3cr3t" || !strings.HasPrefix(v, FingerprintPrefix) {
		t.Errorf("secret parameter bound as %q", v)
	}
	if !strings.HasPrefix(rx.ID, "prx-") || len(rx.ID) != 68 || rx.ID != rx.ComputeID() {
		t.Errorf("id %s is not the content address", rx.ID)
	}
	if !rx.ExpiresAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("expires at %v", rx.ExpiresAt)
	}
	if rx.Program != p.Fingerprint() || rx.Snapshot != in.SnapshotFingerprint() || rx.Authority != pr.AuthorityFingerprint() || rx.Revision != 0 || rx.Instance != "order-1" {
		t.Errorf("prescription does not bind the inputs: %+v", rx)
	}
	again := Resolve(p, inv, &in, &pr, req, t0)
	if again.Prescription.ID != rx.ID {
		t.Error("the same inputs gave a different prescription")
	}
	for name, change := range map[string]func(in *Instance, pr *Principal, req *Request){
		"revision":  func(in *Instance, _ *Principal, _ *Request) { in.Revision = 1 },
		"fact":      func(in *Instance, _ *Principal, _ *Request) { in.Facts["note"] = known("x") },
		"grants":    func(_ *Instance, pr *Principal, _ *Request) { pr.Grants = pr.Grants[:1] },
		"principal": func(_ *Instance, pr *Principal, _ *Request) { pr.ID = "agent-2" },
		"secret":    func(_ *Instance, _ *Principal, req *Request) { req.Parameters = map[string]string{"api_key": "other"} },
	} {
		in2, pr2, req2 := in.Clone(), pr, Request{Parameters: cloneMap(req.Parameters)}
		pr2.Grants = slices.Clone(pr.Grants)
		change(&in2, &pr2, &req2)
		d2 := Resolve(p, inv, &in2, &pr2, req2, t0)
		if d2.Prescription == nil || d2.Prescription.ID == rx.ID || d2.Prescription.sameBinding(rx) {
			t.Errorf("changing the %s did not change the prescription", name)
		}
	}
	later := Resolve(p, inv, &in, &pr, req, t0.Add(time.Second))
	if later.Prescription.ID == rx.ID || !later.Prescription.sameBinding(rx) {
		t.Error("issue time must change the id but not the binding")
	}
}

func TestCapabilityNotDeclared(t *testing.T) {
	src := readFile(t, "testdata/minimal.json")
	src = []byte(strings.NewReplacer(`"state.assign"`, `"ledger.post"`, `["state.write"]`, `["ledger.write"]`).Replace(string(src)))
	load := NewInventory("0.1.0")
	if err := load.RegisterEffect("ledger.post", "ledger.write", nil); err != nil {
		t.Fatal(err)
	}
	p, err := Load(src, load)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's runtime gives the effect a stronger minimum than the
	// program declared for.
	run := NewInventory("0.1.0")
	if err := run.RegisterEffect("ledger.post", "ledger.admin", nil); err != nil {
		t.Fatal(err)
	}
	in := Instance{ID: "i", Program: p.Fingerprint(), Phase: "a"}
	pr := agent("ledger.write", "ledger.admin")
	d := Resolve(p, run, &in, &pr, Request{}, t0)
	if d.Kind != Refused || d.Code != CodeCapabilityNotDeclared {
		t.Errorf("decision = %s %s, want REFUSED CAPABILITY_NOT_DECLARED", d.Kind, d.Code)
	}
}

func TestInstanceValidate(t *testing.T) {
	tests := []struct {
		in   Instance
		path string
	}{
		{Instance{Phase: "Ready"}, "phase"},
		{Instance{Phase: "a", Revision: -1}, "revision"},
		{Instance{Phase: "a", Objective: "X"}, "objective"},
		{Instance{Phase: "a", Facts: map[string]Fact{"Bad": known("x")}}, "facts.Bad"},
		{Instance{Phase: "a", Facts: map[string]Fact{"ok": {Status: "maybe"}}}, "facts.ok.status"},
	}
	for _, tt := range tests {
		err := tt.in.Validate()
		e, ok := err.(*Error)
		if !ok || e.Code != CodeStateInvalid || e.Path != tt.path {
			t.Errorf("Validate(%+v) = %v, want STATE_INVALID at %s", tt.in, err, tt.path)
		}
	}
}

func TestSnapshotFingerprint(t *testing.T) {
	a := Instance{Phase: "a", Facts: map[string]Fact{"x": known("1"), "gone": {Status: StatusAbsent}}}
	b := Instance{Phase: "a", Facts: map[string]Fact{"x": known("1")}, Revision: 9, ID: "other"}
	if a.SnapshotFingerprint() != b.SnapshotFingerprint() {
		t.Error("absent facts, revision or id changed the snapshot fingerprint")
	}
	c := b.Clone()
	c.Facts["x"] = known("2")
	d := b.Clone()
	d.Recovery = &RecoveryMark{Transition: "p/t"}
	for _, other := range []Instance{c, d} {
		if other.SnapshotFingerprint() == b.SnapshotFingerprint() {
			t.Errorf("snapshot fingerprint ignores a change: %+v", other)
		}
	}
}

func TestDecodeState(t *testing.T) {
	in, err := DecodeInstance([]byte(`{"phase":"new","facts":{"a.b":{"status":"known","value":"1"}},"objective":"o","revision":3}`))
	if err != nil || in.Phase != "new" || in.Facts["a.b"].Value != "1" || in.Revision != 3 {
		t.Fatalf("DecodeInstance = %+v, %v", in, err)
	}
	for _, bad := range []string{
		`{"phase":"new","extra":1}`, `{"phase":"new","phase":"old"}`, `{"phase":"new","revision":1.5}`,
		`{"phase":"NEW"}`, `{"phase":"new","facts":{"a":{"status":"sure"}}}`, `[]`, `{"phase":"new"} x`,
	} {
		if _, err := DecodeInstance([]byte(bad)); ErrorCode(err) != CodeStateInvalid {
			t.Errorf("DecodeInstance(%s) = %v, want STATE_INVALID", bad, err)
		}
	}
	pr, err := DecodePrincipal([]byte(`{"id":"bob","kind":"human","grants":["state.write"]}`))
	if err != nil || pr.Kind != AuthorityHuman {
		t.Fatalf("DecodePrincipal = %+v, %v", pr, err)
	}
	for _, bad := range []string{`{"id":"bob","kind":"robot"}`, `{"kind":"agent"}`, `{"id":"x","kind":"agent","grants":["A"]}`, `{"id":"x","kind":"agent","admin":true}`} {
		if _, err := DecodePrincipal([]byte(bad)); ErrorCode(err) != CodeStateInvalid {
			t.Errorf("DecodePrincipal(%s) = %v, want STATE_INVALID", bad, err)
		}
	}
}

// FuzzDecodeState feeds arbitrary state and principal files to the
// decoders and resolves what they accept; nothing may panic.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"phase":"new","facts":{"payment.status":{"status":"known","value":"captured"}},"objective":"shipped","revision":2}`))
	f.Add([]byte(`{"phase":"reserved","facts":{},"recovery":{"transition":"t","prescription":"p","cause":"c"}}`))
	f.Add([]byte(`{"id":"a","kind":"agent","grants":["state.write"],"policy":true}`))
	f.Add([]byte(`{"phase":"new","phase":"x"}`))
	data, err := readFileOK("testdata/full.json")
	if err != nil {
		f.Skip("testdata/full.json is not available")
	}
	p := mustLoad(f, data)
	inv := testInventory()
	f.Fuzz(func(t *testing.T, b []byte) {
		pr, perr := DecodePrincipal(b)
		in, err := DecodeInstance(b)
		if err != nil {
			if ErrorCode(err) != CodeStateInvalid {
				t.Fatalf("error without STATE_INVALID: %v", err)
			}
			return
		}
		if perr != nil {
			pr = agent(CapabilityStateWrite)
		}
		in.Program = p.Fingerprint()
		d := Resolve(p, inv, &in, &pr, Request{}, t0)
		if Rank(string(d.Kind)) != 0 || d.Kind == "" {
			t.Fatalf("bad decision kind %q", d.Kind)
		}
	})
}

func TestControlApplyNeedsAPerson(t *testing.T) {
	src := readFile(t, "testdata/minimal.json")
	src = []byte(strings.NewReplacer(`"state.assign"`, `"control.apply"`, `["state.write"]`, `["control.write"]`).Replace(string(src)))
	inv := testInventory()
	p, err := Load(src, inv)
	if err != nil {
		t.Fatal(err)
	}
	in := Instance{ID: "i", Program: p.Fingerprint(), Phase: "a"}
	bot := agent(CapabilityControlWrite)
	if d := Resolve(p, inv, &in, &bot, Request{}, t0); d.Kind != Frontier || d.Awaiting != AuthorityHuman {
		t.Errorf("agent: %s awaiting %q, want FRONTIER awaiting human", d.Kind, d.Awaiting)
	}
	// The program admits agents, so a person passes the authority check.
	alice := person(CapabilityControlWrite)
	alice.Kind = AuthorityHuman
	p2, _ := Load([]byte(strings.Replace(string(src), `"authority":["agent"]`, `"authority":["agent","human"]`, 1)), inv)
	in.Program = p2.Fingerprint()
	if d := Resolve(p2, inv, &in, &alice, Request{}, t0); d.Kind != Prescribed {
		t.Errorf("person: %s %s", d.Kind, d.Message)
	}
}
