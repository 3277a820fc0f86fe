package flow

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// withRule is full.json with an approval rule on its cancel transition.
func withRule(t testing.TB, rule any) []byte {
	t.Helper()
	return variant(t, fullProgram(t), func(m doc) {
		for _, tr := range m["transitions"].([]any) {
			if tr := tr.(doc); tr["id"] == "cancel" {
				tr["approval"] = rule
			}
		}
	})
}

func TestApprovalRuleParse(t *testing.T) {
	base := mustLoad(t, fullProgram(t))
	tests := []struct {
		name    string
		rule    any
		want    *ApprovalRule // nil: the rule adds nothing
		errPath string        // non-empty: invalid at this path
	}{
		{"two people", doc{"quorum": 2}, &ApprovalRule{Quorum: 2}, ""},
		{"group only", doc{"group": "finance"}, &ApprovalRule{Quorum: 1, Group: "finance"}, ""},
		{"both", doc{"quorum": 3, "group": "finance.eu"}, &ApprovalRule{Quorum: 3, Group: "finance.eu"}, ""},
		{"one person is the default", doc{"quorum": 1}, nil, ""},
		{"empty object is the default", doc{}, nil, ""},
		{"zero", doc{"quorum": 0}, nil, "transitions[3].approval.quorum"},
		{"negative", doc{"quorum": -2}, nil, "transitions[3].approval.quorum"},
		{"too many", doc{"quorum": MaxQuorum + 1}, nil, "transitions[3].approval.quorum"},
		{"fraction", doc{"quorum": 1.5}, nil, "transitions[3].approval.quorum"},
		{"string quorum", doc{"quorum": "2"}, nil, "transitions[3].approval.quorum"},
		{"bad group", doc{"group": "Finance!"}, nil, "transitions[3].approval.group"},
		{"empty group", doc{"group": ""}, nil, ""},
		{"unknown key", doc{"quorum": 2, "people": 2}, nil, "transitions[3].approval.people"},
		{"not an object", 2, nil, "transitions[3].approval"},
		{"deadline", doc{"deadline_seconds": 60}, &ApprovalRule{Quorum: 1, DeadlineSeconds: 60, Fallback: FallbackDecline}, ""},
		{"deadline and fallback", doc{"deadline_seconds": 1, "fallback": "decline"}, &ApprovalRule{Quorum: 1, DeadlineSeconds: 1, Fallback: FallbackDecline}, ""},
		{"deadline with quorum", doc{"quorum": 2, "deadline_seconds": MaxApprovalDeadline}, &ApprovalRule{Quorum: 2, DeadlineSeconds: MaxApprovalDeadline, Fallback: FallbackDecline}, ""},
		{"zero deadline", doc{"deadline_seconds": 0}, nil, "transitions[3].approval.deadline_seconds"},
		{"negative deadline", doc{"deadline_seconds": -5}, nil, "transitions[3].approval.deadline_seconds"},
		{"deadline over 30 days", doc{"deadline_seconds": MaxApprovalDeadline + 1}, nil, "transitions[3].approval.deadline_seconds"},
		{"fractional deadline", doc{"deadline_seconds": 1.5}, nil, "transitions[3].approval.deadline_seconds"},
		{"string deadline", doc{"deadline_seconds": "60"}, nil, "transitions[3].approval.deadline_seconds"},
		{"unknown fallback", doc{"deadline_seconds": 60, "fallback": "approve"}, nil, "transitions[3].approval.fallback"},
		{"fallback without deadline", doc{"fallback": "decline"}, nil, "transitions[3].approval.fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := withRule(t, tt.rule)
			p, err := Load(src, testInventory())
			if tt.errPath != "" {
				var list ErrorList
				if !errors.As(err, &list) || !strings.Contains(err.Error(), tt.errPath) {
					t.Fatalf("Load = %v; want PROGRAM_INVALID at %s", err, tt.errPath)
				}
				for _, e := range list {
					if e.Code != CodeProgramInvalid {
						t.Errorf("code %s, want %s", e.Code, CodeProgramInvalid)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.lookup("order-fulfilment/cancel").Approval
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("rule = %+v, want none", got)
			case tt.want != nil && (got == nil || *got != *tt.want):
				t.Fatalf("rule = %+v, want %+v", got, tt.want)
			}
			// A rule that adds nothing leaves the program's identity as it
			// was; any other rule changes it.
			if same := p.Fingerprint() == base.Fingerprint(); same != (tt.want == nil) {
				t.Fatalf("fingerprint unchanged = %v, want %v", same, tt.want == nil)
			}
		})
	}
}

func TestApprovalRuleAuthority(t *testing.T) {
	tests := []struct {
		id, path string
	}{
		{"ship", "transitions[1].approval"},          // agent authority only
		{"delivered", "transitions[5].approval"},     // OBSERVED_EXTERNAL
		{"rebuild-index", "transitions[4].approval"}, // service only
	}
	for _, tt := range tests {
		src := variant(t, fullProgram(t), func(m doc) {
			for _, tr := range m["transitions"].([]any) {
				if tr := tr.(doc); tr["id"] == tt.id {
					tr["approval"] = doc{"quorum": 2}
				}
			}
		})
		if _, err := Load(src, testInventory()); err == nil || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("%s: Load = %v; want an error at %s", tt.id, err, tt.path)
		}
	}
}

func TestApprovalRuleCanonical(t *testing.T) {
	p := mustLoad(t, withRule(t, doc{"quorum": 2, "group": "finance"}))
	want := `{"approval":{"group":"finance","quorum":2},"authority":`
	if !bytes.Contains(p.Canonical(), []byte(want)) {
		t.Fatalf("canonical bytes lack %s:\n%s", want, p.Canonical())
	}
	// Key order in the source does not matter; the quorum does.
	q := mustLoad(t, withRule(t, doc{"group": "finance", "quorum": 2}))
	if q.Fingerprint() != p.Fingerprint() {
		t.Error("key order changed the fingerprint")
	}
	r := mustLoad(t, withRule(t, doc{"group": "finance", "quorum": 3}))
	if r.Fingerprint() == p.Fingerprint() {
		t.Error("a different quorum kept the fingerprint")
	}
	g := mustLoad(t, withRule(t, doc{"group": "legal", "quorum": 2}))
	if g.Fingerprint() == p.Fingerprint() {
		t.Error("a different group kept the fingerprint")
	}
}

// quorumFixture is the kernel fixture with cancel needing rule.
func quorumFixture(t testing.TB, rule any, opts ...Option) *fixture {
	t.Helper()
	inv := testInventory()
	f := &fixture{clk: &clock{t: t0}, inv: inv, store: NewMemoryStore()}
	f.k = NewKernel(f.store, inv, append([]Option{WithClock(f.clk.now)}, opts...)...)
	p, err := f.k.AddProgram(context.Background(), withRule(t, rule))
	if err != nil {
		t.Fatal(err)
	}
	f.prog = p
	return f
}

func named(id string, grants ...string) Principal {
	p := person(grants...)
	p.ID = id
	return p
}

func TestQuorumApproval(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"quorum": 2})
	f.start(t, "d", "new", nil)
	bot := agent(CapabilityStateWrite)
	alice, bob := named("alice", CapabilityStateWrite, CapabilityHumanApprove), named("bob", CapabilityStateWrite)

	// A person whose own grants hold human.approve still cannot take a
	// transition that needs two people by themselves.
	if d, err := f.k.Prescribe(ctx, "d", alice, Request{Transition: "cancel"}); err != nil || d.Kind != Frontier || d.Awaiting != AuthorityHuman {
		t.Fatalf("alice alone = %+v, %v; want FRONTIER awaiting human", d, err)
	}
	a, err := f.k.RequestApproval(ctx, "d", bot, Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Quorum != 2 || a.Needs() != 2 {
		t.Fatalf("approval quorum %d needs %d, want 2 and 2", a.Quorum, a.Needs())
	}
	if _, err := f.k.Approve(ctx, a.ID, alice); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatalf("first approve = %v, want %s", err, CodeMorePeopleNeeded)
	}
	got, _ := f.k.Approval(ctx, a.ID)
	if got.Status != ApprovalPending || got.Needs() != 1 || !got.ApprovedBy("alice") {
		t.Fatalf("after alice: %+v", got)
	}
	// The same person again is refused and not counted.
	if _, err := f.k.Approve(ctx, a.ID, alice); ErrorCode(err) != CodeAlreadyApproved {
		t.Fatalf("alice again = %v, want %s", err, CodeAlreadyApproved)
	}
	if inst, _ := f.k.Instance(ctx, "d"); inst.Phase != "new" {
		t.Fatalf("phase %s after one person", inst.Phase)
	}
	rc, err := f.k.Approve(ctx, a.ID, bob)
	if err != nil {
		t.Fatalf("second person: %v", err)
	}
	if rc.Principal != "bob" {
		t.Errorf("receipt principal %s, want bob", rc.Principal)
	}
	got, _ = f.k.Approval(ctx, a.ID)
	if got.Status != ApprovalApproved || len(got.Approvers) != 2 || got.Approvers[0].Person != "alice" || got.Approvers[1].Person != "bob" || got.Decider != "bob" {
		t.Fatalf("after bob: %+v", got)
	}
	if inst, _ := f.k.Instance(ctx, "d"); inst.Phase != "cancelled" {
		t.Fatalf("phase %s after two people, want cancelled", inst.Phase)
	}
}

func TestQuorumDeclineByAnyone(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"quorum": 2})
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("alice", CapabilityStateWrite)); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatal(err)
	}
	if _, err := f.k.Decline(ctx, a.ID, named("bob"), "too much"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("carol", CapabilityStateWrite)); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("approve after decline = %v, want %s", err, CodeApprovalClosed)
	}
}

// When the instance moves after the first person approved, the count
// starts again: the approval is stale and a new one is filed.
func TestQuorumResetsWhenBoundChanges(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"quorum": 2})
	f.start(t, "d", "new", map[string]Fact{"stock.reserved": {Status: StatusUnknown}})
	bot := agent(CapabilityStateWrite)
	a, err := f.k.RequestApproval(ctx, "d", bot, Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("alice", CapabilityStateWrite)); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatal(err)
	}
	// The agent releases stock: the instance moves on.
	rx := f.prescribe(t, "d", bot, Request{Transition: "release"})
	if _, err := f.k.Apply(ctx, rx.ID, bot); err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("bob", CapabilityStateWrite)); ErrorCode(err) != CodeApprovalClosed {
		t.Fatalf("approve the moved approval = %v, want %s", err, CodeApprovalClosed)
	}
	b, err := f.k.RequestApproval(ctx, "d", bot, Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID || len(b.Approvers) != 0 || b.Needs() != 2 {
		t.Fatalf("new approval = %+v; want a fresh one needing 2", b)
	}
}

type onlyGroup map[string]bool

func (g onlyGroup) IsMember(_ context.Context, group, person string) (bool, error) {
	return group == "finance" && g[person], nil
}

func TestQuorumGroup(t *testing.T) {
	ctx := context.Background()
	f := quorumFixture(t, doc{"quorum": 2, "group": "finance"}, WithGroups(onlyGroup{"alice": true, "bob": true}))
	f.start(t, "d", "new", nil)
	a, err := f.k.RequestApproval(ctx, "d", agent(), Request{Transition: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Group != "finance" {
		t.Fatalf("group %q", a.Group)
	}
	mallory := named("mallory", CapabilityStateWrite)
	if _, err := f.k.Approve(ctx, a.ID, mallory); ErrorCode(err) != CodeNotInGroup {
		t.Fatalf("outsider approve = %v, want %s", err, CodeNotInGroup)
	}
	if _, err := f.k.Decline(ctx, a.ID, mallory, "no"); ErrorCode(err) != CodeNotInGroup {
		t.Fatalf("outsider decline = %v, want %s", err, CodeNotInGroup)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("alice", CapabilityStateWrite)); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatal(err)
	}
	if _, err := f.k.Approve(ctx, a.ID, named("bob", CapabilityStateWrite)); err != nil {
		t.Fatal(err)
	}
}

// Two people approving at once are both counted once and the transition
// is applied once; the same person twice at once counts once.
func TestQuorumConcurrent(t *testing.T) {
	ctx := context.Background()
	for _, people := range [][]string{{"alice", "bob"}, {"alice", "alice"}} {
		f := quorumFixture(t, doc{"quorum": 2})
		f.start(t, "d", "new", nil)
		a, err := f.k.RequestApproval(ctx, "d", agent(), Request{Transition: "cancel"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(people))
		for i, id := range people {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = f.k.Approve(ctx, a.ID, named(id, CapabilityStateWrite))
			}()
		}
		wg.Wait()
		got, _ := f.k.Approval(ctx, a.ID)
		inst, _ := f.k.Instance(ctx, "d")
		if people[0] != people[1] {
			if got.Status != ApprovalApproved || len(got.Approvers) != 2 || inst.Revision != 1 {
				t.Fatalf("two people: %+v, revision %d, errs %v", got, inst.Revision, errs)
			}
			continue
		}
		if got.Status != ApprovalPending || len(got.Approvers) != 1 || inst.Revision != 0 {
			t.Fatalf("one person twice: %+v, revision %d", got, inst.Revision)
		}
		codes := ErrorCode(errs[0]) + " " + ErrorCode(errs[1])
		if !strings.Contains(codes, CodeAlreadyApproved) || !strings.Contains(codes, CodeMorePeopleNeeded) {
			t.Fatalf("codes %s", codes)
		}
	}
}

// When the last person's approval does not take effect (the effect
// failed), it no longer counts: the others' approvals stay, and that
// person may approve again.
func TestQuorumFailedApplyReleasesTheLastApproval(t *testing.T) {
	ctx := context.Background()
	inv := testInventory()
	var fail atomic.Bool
	fail.Store(true)
	if err := inv.RegisterEffect(EffectToolCall, CapabilityToolInvoke, EffectFunc(func(ctx context.Context, req *EffectRequest) EffectResult {
		if fail.Load() {
			return Fail(errors.New("the carrier is down"))
		}
		return labelEffect(nil)(ctx, req)
	})); err != nil {
		t.Fatal(err)
	}
	src := variant(t, fullProgram(t), func(m doc) {
		for _, tr := range m["transitions"].([]any) {
			if tr := tr.(doc); tr["id"] == "ship" {
				tr["authority"] = []any{"human"}
				tr["approval"] = doc{"quorum": 2}
			}
		}
	})
	f := &fixture{clk: &clock{t: t0}, inv: inv, store: NewMemoryStore()}
	f.k = NewKernel(f.store, inv, WithClock(f.clk.now))
	p, err := f.k.AddProgram(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	f.prog = p
	f.start(t, "o", "reserved", reservedFacts())
	a, err := f.k.RequestApproval(ctx, "o", agent(), Request{Transition: "ship", Parameters: map[string]string{"api_key": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := named("alice", CapabilityToolInvoke), named("bob", CapabilityToolInvoke)
	if _, err := f.k.Approve(ctx, a.ID, alice); ErrorCode(err) != CodeMorePeopleNeeded {
		t.Fatalf("alice = %v", err)
	}
	if _, err := f.k.Approve(ctx, a.ID, bob); ErrorCode(err) != CodeEffectFailed {
		t.Fatalf("bob with a failing effect = %v, want %s", err, CodeEffectFailed)
	}
	got, _ := f.k.Approval(ctx, a.ID)
	if got.Status != ApprovalPending || len(got.Approvers) != 1 || got.Approvers[0].Person != "alice" || got.Needs() != 1 {
		t.Fatalf("after the failed apply: %+v", got)
	}
	fail.Store(false)
	if _, err := f.k.Approve(ctx, a.ID, bob); err != nil {
		t.Fatalf("bob again: %v", err)
	}
	if got, _ := f.k.Approval(ctx, a.ID); got.Status != ApprovalApproved || len(got.Approvers) != 2 {
		t.Fatalf("after bob's second approval: %+v", got)
	}
}
