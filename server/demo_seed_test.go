package server

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/screen/render"
)

// pendingFor counts the pending approvals of instance.
func pendingFor(t *testing.T, s *Server, instance string) int {
	t.Helper()
	list, err := s.flows.PendingApprovals(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range list {
		if a.Instance == instance {
			n++
		}
	}
	return n
}

// paymentScreens counts the open screens titled like the payment screen.
func paymentScreens(s *Server) int {
	s.scrMu.Lock()
	defer s.scrMu.Unlock()
	n := 0
	for _, sc := range s.screens {
		sc.mu.Lock()
		if render.Title(sc.doc) == demoPaymentTitle {
			n++
		}
		sc.mu.Unlock()
	}
	return n
}

// TestSeedDemoFillsTheInbox: the first page a person opens has a proposal,
// an approval and the payment screen, and seeding again adds nothing.
func TestSeedDemoFillsTheInbox(t *testing.T) {
	f := demoFixture(t)
	ctx := context.Background()
	seed, err := f.srv.SeedDemo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seed.Proposal != "profile/plan" || seed.Screen == "" || !strings.HasPrefix(seed.Approval, "apr-") || seed.ApprovalStatus != "pending" {
		t.Fatalf("seed = %+v", seed)
	}
	cookie, _ := f.signIn()
	page, _ := io.ReadAll(f.get("/inbox", cookie).Body)
	for _, want := range []string{"Plan", "pro", "agent (agent)", "expense-approval/approve", seed.Approval} {
		if !strings.Contains(string(page), want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	if strings.Contains(string(page), "Nothing needs you") {
		t.Error("the seeded inbox says it is empty")
	}
	screens, _ := io.ReadAll(f.get("/screens", cookie).Body)
	if !strings.Contains(string(screens), demoPaymentTitle) {
		t.Error("the screens page lacks the payment screen")
	}

	again, err := f.srv.SeedDemo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again != seed {
		t.Fatalf("second seed %+v, first %+v", again, seed)
	}
	if n := len(f.srv.visibleProposals(ctx, f.boot.Owner)); n != 1 {
		t.Errorf("%d proposals after seeding twice, want 1", n)
	}
	if n := pendingFor(t, f.srv, demoSeedExpenseID); n != 1 {
		t.Errorf("%d pending approvals after seeding twice, want 1", n)
	}
	if n := paymentScreens(f.srv); n != 1 {
		t.Errorf("%d payment screens after seeding twice, want 1", n)
	}
}

// TestSeedDemoAfterRestart: a restart puts back what lives in memory, keeps
// the stored approval, and does not file again what a person decided.
func TestSeedDemoAfterRestart(t *testing.T) {
	f := demoFixture(t)
	ctx := context.Background()
	first, err := f.srv.SeedDemo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restart := func() *Server {
		t.Helper()
		srv, err := New(ctx, Config{DataDir: t.TempDir(), Store: f.db, Demo: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		return srv
	}
	srv := restart()
	second, err := srv.SeedDemo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Approval != first.Approval || second.ApprovalStatus != "pending" {
		t.Fatalf("after restart the approval is %s (%s), was %s", second.Approval, second.ApprovalStatus, first.Approval)
	}
	if n := len(srv.visibleProposals(ctx, f.boot.Owner)); n != 1 {
		t.Fatalf("%d proposals after restart, want 1", n)
	}
	if n := pendingFor(t, srv, demoSeedExpenseID); n != 1 {
		t.Fatalf("%d pending approvals after restart, want 1", n)
	}

	// The person declines it; the next start does not ask again.
	if _, _, err := srv.flowDecide(ctx, f.boot.Owner, first.Approval, "decline", "not this month"); err != nil {
		t.Fatal(err)
	}
	third, err := restart().SeedDemo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if third.Approval != first.Approval || third.ApprovalStatus != string(flow.ApprovalDeclined) {
		t.Fatalf("after a decline the seed reports %+v", third)
	}
	if n := pendingFor(t, srv, demoSeedExpenseID); n != 0 {
		t.Fatalf("%d pending approvals after a decline and a restart, want 0", n)
	}
}

func TestSeedDemoNeedsTheDemo(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.srv.SeedDemo(context.Background()); err == nil || !strings.Contains(err.Error(), "Config.Demo") {
		t.Fatalf("seeding without the demo: %v", err)
	}
}
