package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store/postgres/pgtest"
)

// serveProc is an `assent serve` process.
type serveProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	base string
	// token is the agent token, printed at the first start only.
	token string
	link  string
}

// startServe starts `assent serve --demo` on dir (and the store URL, when
// not empty) and waits for its welcome text.
func startServe(t *testing.T, exe, dir, storeURL string) *serveProc {
	t.Helper()
	args := []string{"serve", "--demo", "--data", dir, "--addr", "127.0.0.1:0"}
	// The store URL, password included, goes through the environment:
	// serve refuses a password on its command line.
	p := &serveProc{cmd: exec.Command(exe, args...)}
	p.cmd.Env = append(os.Environ(), "ASSENT_STORE="+storeURL)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	var text string
	testwait.EventuallyC(t, 60*time.Second, func(c *testwait.C) {
		p.mu.Lock()
		text = p.out.String()
		p.mu.Unlock()
		if !strings.Contains(text, "MCP client configuration") {
			c.Errorf("output so far:\n%s", text)
		}
	}, "assent serve starting")
	if m := regexp.MustCompile(`serving on (\S+) \(`).FindStringSubmatch(text); m != nil {
		p.base = m[1]
	}
	if m := regexp.MustCompile(`shown once; keep it secret\):\n  (asnt_\S+)`).FindStringSubmatch(text); m != nil {
		p.token = m[1]
	}
	p.link = regexp.MustCompile(`http://\S+/signin/\S+`).FindString(text)
	if p.link == "" && strings.Contains(text, "token link owner --data") {
		// Only the first start prints a live link; later ones print the
		// command that makes one.
		link := exec.Command(exe, "token", "link", "owner", "--data", dir)
		link.Env = p.cmd.Env
		out, err := link.Output()
		if err != nil {
			t.Fatalf("token link: %v", err)
		}
		p.link = regexp.MustCompile(`http://\S+/signin/\S+`).FindString(string(out))
	}
	if p.base == "" || p.link == "" {
		t.Fatalf("the welcome text lacks the address or the sign-in link:\n%s", text)
	}
	return p
}

// kill ends the process with SIGKILL: nothing is flushed or closed.
func (p *serveProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// person is a signed-in person's browser session.
type person struct {
	cookie *http.Cookie
	csrf   string
}

// signIn follows the sign-in link p printed.
func (p *serveProc) signIn(t *testing.T) person {
	t.Helper()
	code := p.link[strings.LastIndex(p.link, "/")+1:]
	req, _ := http.NewRequest("POST", p.base+"/signin", strings.NewReader(url.Values{"link": {code}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.base)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var who person
	for _, c := range resp.Cookies() {
		if c.Name == "assent_session" || strings.Contains(strings.ToLower(c.Name), "session") {
			who.cookie = c
		}
	}
	if who.cookie == nil {
		t.Fatalf("sign in: %d, no session cookie", resp.StatusCode)
	}
	page := p.page(t, who, "/inbox")
	const meta = `name="csrf-token" content="`
	i := strings.Index(page, meta)
	if i < 0 {
		t.Fatal("the inbox has no CSRF token")
	}
	rest := page[i+len(meta):]
	who.csrf = rest[:strings.IndexByte(rest, '"')]
	return who
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}

// page fetches a web page as who.
func (p *serveProc) page(t *testing.T, who person, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", p.base+path, nil)
	req.AddCookie(who.cookie)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// api sends a JSON request with the agent's token (or, when who is given,
// as the person in the web UI) and decodes the answer.
func (p *serveProc) api(t *testing.T, method, path, token string, who *person, body any) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case url.Values:
		rd, contentType = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if who != nil {
		req.AddCookie(who.cookie)
		req.Header.Set("Origin", p.base)
		req.Header.Set("X-CSRF-Token", who.csrf)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, string(b)
}

// TestInboxSurvivesKill: an agent stages proposals, shows a screen whose
// press waits for confirmation and files a Flow approval; the process is
// killed with SIGKILL and started again on the same store; the person's
// inbox lists the same items, and each is decidable. It runs on SQLite and,
// when ASSENT_TEST_POSTGRES is set, on PostgreSQL.
func TestInboxSurvivesKill(t *testing.T) {
	exe := buildAssent(t)
	t.Run("sqlite", func(t *testing.T) { inboxSurvivesKill(t, exe, "") })
	t.Run("postgres", func(t *testing.T) {
		u, _ := pgtest.URL(t)
		inboxSurvivesKill(t, exe, u)
	})
}

func inboxSurvivesKill(t *testing.T, exe, storeURL string) {
	dir := t.TempDir()
	first := startServe(t, exe, dir, storeURL)
	tok := first.token
	if tok == "" {
		t.Fatal("the first start printed no agent token")
	}

	// The agent proposes two changes.
	for ctl, v := range map[string]string{"email": "ada@restart.example", "displayName": "Ada Restarted"} {
		if code, _, raw := first.api(t, "POST", "/v1/controls/execute", tok, nil, map[string]any{"action": "stage",
			"identity": map[string]any{"formId": "profile", "controlId": ctl}, "value": v}); code != http.StatusOK {
			t.Fatalf("stage %s: %d %s", ctl, code, raw)
		}
	}
	// The agent shows a payment screen; the person presses Pay, which
	// waits for their confirmation.
	stream := "root = Card([title, amount, pay])\ntitle = Heading(\"Restart check\")\n$amount = 42\namount = Text($amount)\n" +
		"pay = Button(\"Pay\", action=\"pay\")\npayIt = McpMutation(pay, tool=\"payments.confirm\", params={amount: $amount})\n"
	code, shown, raw := first.api(t, "POST", "/v1/screens", tok, nil, stream)
	screenID, _ := shown["id"].(string)
	if code != http.StatusCreated || screenID == "" {
		t.Fatalf("show: %d %s", code, raw)
	}
	who := first.signIn(t)
	_, press, raw := first.api(t, "POST", "/screens/"+screenID+"/press", "", &who, `{"button":"pay"}`)
	pressID, _ := press["press"].(string)
	if press["status"] != "confirm" || press["sentence"] != "Pay $42.00?" {
		t.Fatalf("press: %s", raw)
	}
	// The agent drafts and submits an expense over the limit, which then
	// waits for the person's approval.
	if code, _, raw := first.api(t, "POST", "/v1/flows/instances", tok, nil, map[string]any{
		"program": "expense-approval", "id": "restart-expense", "phase": "draft", "objective": "expense-paid",
		"facts": map[string]any{
			"expense.amount":      map[string]any{"status": "known", "value": "1200.00 EUR"},
			"expense.description": map[string]any{"status": "known", "value": "Restart check dinner"},
			"expense.payee_iban":  map[string]any{"status": "known", "value": demo.PayeeIBAN},
		}}); code != http.StatusCreated {
		t.Fatalf("start expense: %d %s", code, raw)
	}
	_, sub, raw := first.api(t, "POST", "/v1/flows/instances/restart-expense/prescribe", tok, nil, map[string]any{})
	subID := prescriptionID(t, sub)
	if subID == "" {
		t.Fatalf("prescribe submit: %s", raw)
	}
	if code, _, raw := first.api(t, "POST", "/v1/flows/prescriptions/"+subID+"/apply", tok, nil, nil); code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, raw)
	}
	_, pres, raw := first.api(t, "POST", "/v1/flows/instances/restart-expense/prescribe", tok, nil, map[string]any{})
	aprID, _ := pres["approval"].(map[string]any)["id"].(string)
	if aprID == "" {
		t.Fatalf("prescribe: %s", raw)
	}

	items := []string{"ada@restart.example", "Ada Restarted", aprID, "Restart check dinner"}
	inbox := first.page(t, who, "/inbox")
	for _, want := range items {
		if !strings.Contains(inbox, want) {
			t.Fatalf("the inbox before the kill lacks %q", want)
		}
	}

	first.kill()
	second := startServe(t, exe, dir, storeURL)

	// The session survived too; the inbox lists the same items.
	inbox = second.page(t, who, "/inbox")
	for _, want := range items {
		if !strings.Contains(inbox, want) {
			t.Errorf("the inbox after the kill lacks %q", want)
		}
	}
	if page := second.page(t, who, "/screens/"+screenID+"?press="+pressID); !strings.Contains(page, "Restart check") || !strings.Contains(page, "Pay $42.00?") {
		t.Errorf("the screen after the kill lacks its heading or its waiting confirmation")
	}

	// Each item is decidable.
	_, snap, raw := second.api(t, "GET", "/v1/controls/profile/email", tok, nil, nil)
	rev, ok := snap["state"].(map[string]any)["staged"].(map[string]any)["revision"].(float64)
	if !ok {
		t.Fatalf("the email proposal after the kill: %s", raw)
	}
	if code, res, raw := second.api(t, "POST", "/web/controls/apply", "", &who, url.Values{"csrf": {who.csrf}, "formId": {"profile"}, "controlId": {"email"},
		"revision": {strconv.FormatInt(int64(rev), 10)}}); code != http.StatusOK || res["ok"] != true {
		t.Errorf("apply after the kill: %d %s", code, raw)
	}
	if code, res, raw := second.api(t, "POST", "/screens/"+screenID+"/confirm", "", &who, `{"press":"`+pressID+`"}`); code != http.StatusOK || res["status"] != "done" {
		t.Errorf("confirm after the kill: %d %s", code, raw)
	}
	if code, res, raw := second.api(t, "POST", "/web/flows/approvals/"+aprID+"/approve", "", &who, url.Values{"csrf": {who.csrf}}); code != http.StatusOK || res["phase"] != "approved" {
		t.Errorf("approve after the kill: %d %s", code, raw)
	}
	if _, apr, raw := second.api(t, "GET", "/v1/flows/approvals/"+aprID, tok, nil, nil); apr["status"] != "approved" {
		t.Errorf("approval after the decision: %s", raw)
	}
	if _, snap, raw := second.api(t, "GET", "/v1/controls/profile/email", tok, nil, nil); snap["state"].(map[string]any)["value"] != "ada@restart.example" {
		t.Errorf("email after apply: %s", raw)
	}
}
