package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
)

// flowServer starts a demo server and returns its URL, the first agent's
// token and a token for an agent granted state.write and tool.invoke.
func flowServer(t *testing.T) (url, first, payer string) {
	t.Helper()
	url, boot, db := startServer(t, true)
	payer, _, err := auth.IssueToken(context.Background(), db, store.KindAgent, "payer", []string{"state.write", "tool.invoke"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return url, boot.AgentToken, payer
}

func TestFlowServedCommands(t *testing.T) {
	url, first, payer := flowServer(t)
	run := func(token string, stdin string, args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--url", url, "--token-file", writeTokenFile(t, token)), strings.NewReader(stdin), &out, &errw)
		return code, out.String(), errw.String()
	}
	const iban = "DE89370400440532013000"

	code, out, errs := run(payer, "", "flow", "load", "../../examples/flows/expense-approval.json")
	if code != 0 || !strings.Contains(out, "loaded expense-approval 1.0.0 (7 transitions)") || !strings.Contains(out, "sha256:") {
		t.Fatalf("load: %d %s %s", code, out, errs)
	}
	if code, _, errs := run(payer, `{"schema_version":1}`, "flow", "load", "-"); code != exitRefused || !strings.Contains(errs, "PROGRAM_INVALID") {
		t.Fatalf("load invalid: %d %s", code, errs)
	}
	// A new program from an agent is only proposed: a person approves it.
	src, err := os.ReadFile("../../examples/flows/expense-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	variant := strings.Replace(string(src), `"priority": 1`, `"priority": 9`, 1)
	if code, out, errs := run(payer, variant, "flow", "load", "-"); code != 0 || !strings.HasPrefix(out, "proposed expense-approval") || !strings.Contains(out, "/inbox#section-flow-programs") {
		t.Fatalf("agent's load of a new program: %d %s %s", code, out, errs)
	}

	// An agent cannot start an expense past its approval, nor choose the
	// band the amount decides.
	code, _, errs = run(payer, "", "flow", "start", "expense-approval", "--phase", "approved", "--id", "exp-9",
		"--fact", "expense.amount=120.00 EUR", "--objective", "expense-paid")
	if code != exitRefused || !strings.Contains(errs, "forbidden") || !strings.Contains(errs, "entry phase (draft)") {
		t.Fatalf("an agent's start past the approval: %d %s", code, errs)
	}
	code, _, errs = run(payer, "", "flow", "start", "expense-approval", "--phase", "draft", "--id", "exp-9",
		"--fact", "expense.amount=900.00 EUR", "--fact", "expense.amount_band=within_limit", "--objective", "expense-paid")
	if code != exitRefused || !strings.Contains(errs, "invalid_request") || !strings.Contains(errs, "over_limit") {
		t.Fatalf("an agent's start with a band its amount contradicts: %d %s", code, errs)
	}
	code, out, errs = run(payer, "", "flow", "start", "expense-approval", "--phase", "draft", "--id", "exp-9",
		"--fact", "expense.amount=120.00 EUR", "--objective", "expense-paid")
	if code != 0 || out != "started exp-9 in phase draft (revision 0)\n" {
		t.Fatalf("start: %d %q %s", code, out, errs)
	}
	// Within the limit, the agent takes the expense through the program
	// itself: submit, then the automatic approval.
	for _, step := range []string{"submit", "approve-within-limit"} {
		code, out, errs = run(payer, "", "flow", "prescribe", "exp-9")
		prx := regexp.MustCompile(`prx-[0-9a-f]{64}`).FindString(out)
		if code != 0 || !strings.HasPrefix(out, "PRESCRIBED expense-approval/"+step+"\n") || prx == "" {
			t.Fatalf("prescribe %s: %d\n%s%s", step, code, out, errs)
		}
		if code, out, errs = run(payer, "", "flow", "apply", prx); code != 0 {
			t.Fatalf("apply %s: %d %s %s", step, code, out, errs)
		}
	}
	if code, _, _ := run(payer, "", "flow", "start", "expense-approval"); code != exitUsage {
		t.Fatalf("start without --phase: exit %d", code)
	}

	code, out, _ = run(payer, "", "flow", "list")
	if code != 0 || !strings.Contains(out, "expense-approval") || !strings.Contains(out, "deployment") || !strings.Contains(out, "exp-9") || strings.Contains(out, "expense-1001") {
		t.Fatalf("list: %d\n%s", code, out)
	}

	code, out, _ = run(payer, "", "flow", "prescribe", "exp-9", "--param", "iban="+iban, "--param", "reference=EXP-9")
	prx := regexp.MustCompile(`prx-[0-9a-f]{64}`).FindString(out)
	if code != 0 || !strings.HasPrefix(out, "PRESCRIBED expense-approval/pay\n") || prx == "" || strings.Contains(out, iban) {
		t.Fatalf("prescribe: %d\n%s", code, out)
	}
	code, out, errs = run(payer, "", "flow", "apply", prx, "--json")
	var rc struct {
		ID    string `json:"id"`
		Phase string `json:"phase"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rc) != nil || rc.Phase != "paid" || !strings.HasPrefix(rc.ID, "rcp-") {
		t.Fatalf("apply: %d %s %s", code, out, errs)
	}
	code, out, _ = run(payer, "", "flow", "apply", prx)
	if code != 0 || !strings.Contains(out, "receipt "+rc.ID) {
		t.Fatalf("re-apply: %d %s", code, out)
	}

	code, out, _ = run(payer, "", "flow", "inspect", "exp-9")
	for _, want := range []string{"phase paid", "payment.status", "sent", rc.ID, "committed"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("inspect lacks %q: %d\n%s", want, code, out)
		}
	}
	if strings.Contains(out, iban) {
		t.Fatal("inspect shows the secret IBAN")
	}

	// The first agent cannot see the payer's instance, and gets the same
	// answer as for one that does not exist.
	code, _, errs = run(first, "", "flow", "inspect", "exp-9")
	code2, _, errs2 := run(first, "", "flow", "inspect", "exp-0")
	if code != exitRefused || code2 != exitRefused || strings.ReplaceAll(errs, "exp-9", "exp-0") != errs2 {
		t.Fatalf("another's instance: %d %q vs %d %q", code, errs, code2, errs2)
	}

	// The demo expense waits for a person.
	code, out, _ = run(first, "", "flow", "prescribe", "expense-1001")
	if code != 0 || !strings.HasPrefix(out, "FRONTIER expense-approval/approve (awaiting human)") || !strings.Contains(out, "approval apr-") {
		t.Fatalf("prescribe the demo expense: %d\n%s", code, out)
	}
	// A refused decision exits 1.
	if code, out, _ := run(first, "", "flow", "prescribe", "expense-1001", "--transition", "nope"); code != exitRefused || !strings.Contains(out, "TRANSITION_UNKNOWN") {
		t.Fatalf("refused: %d %s", code, out)
	}
	if code, _, _ := run(first, "", "flow", "prescribe", "expense-1001", "--param", "novalue"); code != exitUsage {
		t.Fatalf("bad --param: exit %d", code)
	}
}

// assent flow load --deadline sends the proposal's deadline, which the
// answer echoes; a --deadline that is not 1s to 30d in whole seconds is a
// usage error and sends nothing.
func TestFlowLoadDeadline(t *testing.T) {
	url, _, payer := flowServer(t)
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--url", url, "--token-file", writeTokenFile(t, payer)), strings.NewReader(stdin), &out, &errw)
		return code, out.String(), errw.String()
	}
	src, err := os.ReadFile("../../examples/flows/expense-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	variant := strings.Replace(string(src), `"priority": 1`, `"priority": 8`, 1)
	for _, bad := range []string{"0s", "500ms", "31d", "1.5s", "soon"} {
		if code, _, errs := run(variant, "flow", "load", "-", "--deadline", bad); code != exitUsage || !strings.Contains(errs, "--deadline") {
			t.Errorf("--deadline %s: %d %s", bad, code, errs)
		}
	}
	code, out, errs := run(variant, "flow", "load", "-", "--deadline", "2h", "--reason", "faster payments")
	if code != 0 || !strings.HasPrefix(out, "proposed expense-approval") || !strings.Contains(out, "declined unless decided by ") {
		t.Fatalf("load with a deadline: %d %s %s", code, out, errs)
	}
}
