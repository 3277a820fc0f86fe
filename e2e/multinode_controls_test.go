package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// TestMultiNodeControls runs three `assent serve` processes on one
// PostgreSQL database and checks that control decisions are serialized by
// the database and that hosted forms reach every node without a restart:
// an agent stages on node A and a person applies the proposal on nodes B
// and C at the same moment, and exactly one apply succeeds; a form an
// application declares through node A is read and staged on node B, and
// gone there once removed through node A.
func TestMultiNodeControls(t *testing.T) {
	cl := startCluster(t)
	t.Run("racing_applies", func(t *testing.T) { multiNodeRacingApplies(t, cl.a, cl.b, cl.c, cl.token) })
	t.Run("hosted_form", func(t *testing.T) { multiNodeHostedForm(t, cl.exe, cl.store, cl.a, cl.b, cl.token) })
}

// proposalOn waits until p shows a proposal of value for the control and
// returns its revision.
func proposalOn(t *testing.T, p *serveProc, tok, path, value string) float64 {
	t.Helper()
	var rev float64
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		_, snap, raw := p.api(t, "GET", path, tok, nil, nil)
		st, _ := snap["state"].(map[string]any)
		pr, _ := st["staged"].(map[string]any)
		var ok bool
		if rev, ok = pr["revision"].(float64); !ok || st["stagedValue"] != value {
			c.Errorf("%s", raw)
		}
	}, fmt.Sprintf("%s showing the proposal %q of %s", p.base, value, path))
	return rev
}

func multiNodeRacingApplies(t *testing.T, a, b, c *serveProc, tok string) {
	const rounds = 5
	people := []person{b.signIn(t), c.signIn(t)}
	for round := range rounds {
		value := "racer" + string(rune('a'+round)) + "@nodes.example"
		if code, _, raw := a.api(t, "POST", "/v1/controls/execute", tok, nil, map[string]any{"action": "stage",
			"identity": map[string]any{"formId": "profile", "controlId": "email"}, "value": value}); code != http.StatusOK {
			t.Fatalf("stage on node A: %d %s", code, raw)
		}
		rev := proposalOn(t, b, tok, "/v1/controls/profile/email", value)
		if got := proposalOn(t, c, tok, "/v1/controls/profile/email", value); got != rev {
			t.Fatalf("nodes B and C show revisions %v and %v of one proposal", rev, got)
		}
		// The person applies the proposal on nodes B and C at once.
		var wg sync.WaitGroup
		answers := make([]map[string]any, 2)
		for i, p := range []*serveProc{b, c} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := people[i]
				_, answers[i], _ = p.api(t, "POST", "/web/controls/apply", "", &who, url.Values{"csrf": {who.csrf},
					"formId": {"profile"}, "controlId": {"email"}, "revision": {strconv.FormatInt(int64(rev), 10)}})
			}()
		}
		wg.Wait()
		applied, refused := 0, 0
		for _, ans := range answers {
			switch {
			case ans["ok"] == true:
				applied++
			case ans["reason"] == "stale_revision":
				refused++
			default:
				t.Fatalf("round %d: apply answered %v", round, ans)
			}
		}
		if applied != 1 || refused != 1 {
			t.Fatalf("round %d: %d applied and %d refused with stale_revision, want one of each: %v", round, applied, refused, answers)
		}
		// Node A reads the outcome: the value applied, nothing staged.
		testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
			_, snap, _ := a.api(t, "GET", "/v1/controls/profile/email", tok, nil, nil)
			if st, _ := snap["state"].(map[string]any); st["value"] != value || st["staged"] != nil {
				c.Errorf("node A shows %v", snap["state"])
			}
		}, fmt.Sprintf("round %d: node A showing the applied value", round))
	}
}

// serviceToken creates a service principal on the shared store with the
// CLI and returns its token.
func serviceToken(t *testing.T, exe, storeURL string) string {
	t.Helper()
	cmd := exec.Command(exe, "token", "create", "--data", t.TempDir(), "--kind", "service", "--name", "forms-app", "--json")
	cmd.Env = append(os.Environ(), "ASSENT_STORE="+storeURL)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token create: %v %s", err, out)
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Token == "" {
		t.Fatalf("token create printed %s (%v)", out, err)
	}
	return v.Token
}

func multiNodeHostedForm(t *testing.T, exe, storeURL string, a, b *serveProc, tok string) {
	svc := serviceToken(t, exe, storeURL)
	decl := map[string]any{"controls": []any{
		map[string]any{"controlId": "city", "metadata": map[string]any{"kind": "text", "label": "City"}, "value": "Paris"},
		map[string]any{"controlId": "zip", "metadata": map[string]any{"kind": "text", "label": "ZIP"}, "value": "75001"},
	}}
	if code, _, raw := a.api(t, "POST", "/v1/forms/shipping/controls", svc, nil, decl); code != http.StatusOK {
		t.Fatalf("declare on node A: %d %s", code, raw)
	}
	// Node B serves the form without a restart.
	var (
		code int
		snap map[string]any
		raw  string
	)
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if code, snap, raw = b.api(t, "GET", "/v1/controls/shipping/city", tok, nil, nil); code != http.StatusOK {
			c.Errorf("%d %s", code, raw)
		}
	}, "node B serving the form declared on node A")
	if st, _ := snap["state"].(map[string]any); st["value"] != "Paris" {
		t.Fatalf("node B after the form was declared on node A: %d %s", code, raw)
	}
	if code, res, raw := b.api(t, "POST", "/v1/controls/execute", tok, nil, map[string]any{"action": "stage",
		"identity": map[string]any{"formId": "shipping", "controlId": "city"}, "value": "Lyon"}); code != http.StatusOK || res["ok"] != true {
		t.Fatalf("stage on node B: %d %s", code, raw)
	}
	// The application's edit through node A reaches node B.
	if code, _, raw := a.api(t, "PUT", "/v1/forms/shipping/controls/zip/value", svc, nil, map[string]any{"value": "69001"}); code != http.StatusOK {
		t.Fatalf("edit on node A: %d %s", code, raw)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		_, snap, raw = b.api(t, "GET", "/v1/controls/shipping/zip", tok, nil, nil)
		if st, _ := snap["state"].(map[string]any); st["value"] != "69001" {
			c.Errorf("%s", raw)
		}
	}, "node B showing the edit made through node A")
	// Removed through node A: gone on node B.
	if code, _, raw := a.api(t, "DELETE", "/v1/forms/shipping/controls", svc, nil, nil); code != http.StatusNoContent {
		t.Fatalf("remove on node A: %d %s", code, raw)
	}
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if code, _, raw = b.api(t, "GET", "/v1/controls/shipping/city", tok, nil, nil); code != http.StatusNotFound {
			c.Errorf("%d %s", code, raw)
		}
	}, "node B dropping the form removed on node A")
	if code, res, raw := b.api(t, "POST", "/v1/controls/execute", tok, nil, map[string]any{"action": "stage",
		"identity": map[string]any{"formId": "shipping", "controlId": "city"}, "value": "Nice"}); code != http.StatusNotFound || res["reason"] != "not_found" {
		t.Fatalf("stage on node B after the removal: %d %s", code, raw)
	}
}
