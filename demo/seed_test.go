package demo_test

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// pendingFor counts the pending approvals of instance.
func pendingFor(t *testing.T, s *server.Server, instance string) int {
	t.Helper()
	list, err := s.Flows().Kernel().PendingApprovals(context.Background())
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

// paymentScreens counts the open screens the owner sees whose outline
// shows the payment screen's heading.
func paymentScreens(t *testing.T, f *assenttest.Kit) int {
	t.Helper()
	cookie, _ := f.SignIn()
	getJSON := func(path string) map[string]any {
		var out map[string]any
		if err := json.NewDecoder(f.Get(path, cookie).Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return out
	}
	list, _ := getJSON("/v1/screens")["screens"].([]any)
	n := 0
	for _, sc := range list {
		id := assenttest.As[api.ScreenRow](t, sc).ID
		if outline, _ := getJSON("/v1/screens/" + id)["outline"].(string); strings.Contains(outline, demo.PaymentTitle) {
			n++
		}
	}
	return n
}

// TestSeedDemoFillsTheInbox: the first page a person opens has a proposal,
// an approval and the payment screen, and seeding again adds nothing.
func TestSeedDemoFillsTheInbox(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	seed, err := f.Demo.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seed.Proposal != "profile/plan" || seed.Screen == "" || !strings.HasPrefix(seed.Approval, "apr-") || seed.ApprovalStatus != "pending" {
		t.Fatalf("seed = %+v", seed)
	}
	cookie, _ := f.SignIn()
	page, _ := io.ReadAll(f.Get("/inbox", cookie).Body)
	for _, want := range []string{"Plan", "<dt>Proposed</dt><dd>Pro</dd>", "<dt>Proposed by</dt><dd>agent</dd>", "expense-approval/approve", seed.Approval} {
		if !strings.Contains(string(page), want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	if strings.Contains(string(page), "Nothing needs you") {
		t.Error("the seeded inbox says it is empty")
	}
	list, _ := io.ReadAll(f.Get("/screens", cookie).Body)
	if !strings.Contains(string(list), demo.PaymentTitle) {
		t.Error("the screens page lacks the payment screen")
	}

	again, err := f.Demo.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again != seed {
		t.Fatalf("second seed %+v, first %+v", again, seed)
	}
	if n := len(f.Srv.Controls().VisibleProposals(ctx, f.Boot.Owner)); n != 1 {
		t.Errorf("%d proposals after seeding twice, want 1", n)
	}
	if n := pendingFor(t, f.Srv, demo.SeedExpenseID); n != 1 {
		t.Errorf("%d pending approvals after seeding twice, want 1", n)
	}
	if n := paymentScreens(t, f); n != 1 {
		t.Errorf("%d payment screens after seeding twice, want 1", n)
	}
}

// TestSeedDemoAfterRestart: a restart puts back what lives in memory, keeps
// the stored approval, and does not file again what a person decided.
func TestSeedDemoAfterRestart(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := context.Background()
	first, err := f.Demo.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := f
	restart := func() (*server.Server, *demo.App) {
		t.Helper()
		k = k.Restart(nil)
		return k.Srv, k.Demo
	}
	srv, app := restart()
	second, err := app.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Approval != first.Approval || second.ApprovalStatus != "pending" {
		t.Fatalf("after restart the approval is %s (%s), was %s", second.Approval, second.ApprovalStatus, first.Approval)
	}
	if n := len(srv.Controls().VisibleProposals(ctx, f.Boot.Owner)); n != 1 {
		t.Fatalf("%d proposals after restart, want 1", n)
	}
	if n := pendingFor(t, srv, demo.SeedExpenseID); n != 1 {
		t.Fatalf("%d pending approvals after restart, want 1", n)
	}

	// The person declines it; the next start does not ask again.
	if _, _, err := srv.Flows().Decide(ctx, f.Boot.Owner, first.Approval, "decline", "not this month"); err != nil {
		t.Fatal(err)
	}
	srv, app = restart()
	third, err := app.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if third.Approval != first.Approval || third.ApprovalStatus != string(flow.ApprovalDeclined) {
		t.Fatalf("after a decline the seed reports %+v", third)
	}
	if n := pendingFor(t, srv, demo.SeedExpenseID); n != 0 {
		t.Fatalf("%d pending approvals after a decline and a restart, want 0", n)
	}
}

// TestSeedDemoLeavesADecidedPlan: once a person applied or discarded the
// plan the agent proposed, a restart does not propose it again.
func TestSeedDemoLeavesADecidedPlan(t *testing.T) {
	for _, action := range []control.Action{control.Apply, control.Discard} {
		t.Run(string(action), func(t *testing.T) {
			f := assenttest.StartDemo(t)
			ctx := context.Background()
			if _, err := f.Demo.Seed(ctx); err != nil {
				t.Fatal(err)
			}
			res := f.Srv.Controls().Exec(ctx, f.Boot.Owner, control.Command{Action: action, Identity: control.Identity{FormID: "profile", ControlID: "plan"}},
				control.CommandContext{Source: control.SourceUser, Confirmed: true})
			if !res.OK {
				t.Fatalf("the person's %s: %s %s", action, res.Reason, res.Message)
			}
			k := f.Restart(nil)
			srv := k.Srv
			if _, err := k.Demo.Seed(ctx); err != nil {
				t.Fatal(err)
			}
			if got := srv.Controls().VisibleProposals(ctx, f.Boot.Owner); len(got) != 0 {
				t.Fatalf("after the person's %s and a restart, %d proposals: %+v", action, len(got), got)
			}
		})
	}
}

// TestSeedNeedsAWorkspace: the demo installs on a store nobody
// bootstrapped, and seeding it then says what is missing.
func TestSeedNeedsAWorkspace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, app, err := demo.NewServer(ctx, server.Config{DataDir: dir, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if _, err := app.Seed(ctx); err == nil || !strings.Contains(err.Error(), "EnsureBootstrap") {
		t.Fatalf("seeding without a workspace: %v", err)
	}
	if _, err := srv.Flows().Kernel().Instance(ctx, demo.ExpenseID); err == nil {
		t.Fatal("the demo started an expense with no agent to own it")
	}
}
