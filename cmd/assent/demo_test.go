package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/testwait"
)

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// served is "assent serve" running in process.
type served struct {
	out   *syncBuffer
	base  string
	dir   string
	token string // empty after the first start
	// tokenFile holds token, for --token-file.
	tokenFile string
	link      string
	stop      func() int
}

// serveInProcess runs "assent serve ARGS…" until the test ends (or stop)
// and returns what its welcome text says.
func serveInProcess(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errw := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- executeContext(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), out, errw)
	}()
	var once sync.Once
	exit := -1
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case exit = <-code:
			case <-time.After(30 * time.Second):
				t.Error("assent serve did not stop")
			}
		})
		return exit
	}
	t.Cleanup(func() { stop() })
	testwait.EventuallyC(t, 30*time.Second, func(c *testwait.C) {
		select {
		case n := <-code:
			t.Fatalf("assent serve exited %d: %s", n, errw.String())
		default:
		}
		if !strings.Contains(out.String(), "MCP client configuration") {
			c.Errorf("no welcome text: %s %s", out.String(), errw.String())
		}
	}, "the welcome text")
	// The JSON follows the heading; wait until it is complete.
	testwait.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "\n}\n") }, "the MCP client configuration complete")
	s := &served{out: out, stop: stop}
	text := out.String()
	if m := regexp.MustCompile(`serving on (\S+) \(data: (.+), store: `).FindStringSubmatch(text); m != nil {
		s.base, s.dir = m[1], m[2]
	}
	if m := regexp.MustCompile(`shown once; keep it secret\):\n  (asnt_\S+)`).FindStringSubmatch(text); m != nil {
		s.token = m[1]
		s.tokenFile = writeTokenFile(t, s.token)
	}
	s.link = regexp.MustCompile(`http://\S+/signin/\S+`).FindString(text)
	if s.link == "" && strings.Contains(text, "token link owner --data") {
		// Only the first start prints a live link; later ones print the
		// command that makes one.
		var lout, lerr bytes.Buffer
		if code := execute([]string{"token", "link", "owner", "--data", s.dir}, strings.NewReader(""), &lout, &lerr); code != 0 {
			t.Fatalf("token link: exit %d %s", code, lerr.String())
		}
		s.link = regexp.MustCompile(`http://\S+/signin/\S+`).FindString(lout.String())
	}
	if s.base == "" || s.link == "" {
		t.Fatalf("welcome text lacks the URL or the sign-in link:\n%s", text)
	}
	return s
}

// mcpConfig decodes the MCP client configuration printed in text.
func mcpConfig(t *testing.T, text string) map[string]map[string]any {
	t.Helper()
	i := strings.Index(text, "MCP client configuration")
	j := strings.Index(text[i:], "{")
	var cfg struct {
		Servers map[string]map[string]any `json:"mcpServers"`
	}
	if i < 0 || j < 0 || json.NewDecoder(strings.NewReader(text[i+j:])).Decode(&cfg) != nil {
		t.Fatalf("no MCP configuration in:\n%s", text)
	}
	return cfg.Servers
}

// person is the owner signed in to the web UI.
type person struct {
	t    *testing.T
	base string
	http *http.Client
}

func signInPerson(t *testing.T, base, link string) *person {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	secret := link[strings.LastIndex(link, "/")+1:]
	req, _ := http.NewRequest("POST", base+"/signin", strings.NewReader(url.Values{"link": {secret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	return &person{t: t, base: base, http: hc}
}

func (p *person) get(path string) string {
	p.t.Helper()
	resp, err := p.http.Get(p.base + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// approve approves, in the web inbox, the pending approval of instance.
func (p *person) approve(instance string) bool {
	p.t.Helper()
	var list struct {
		Approvals []struct {
			ID       string `json:"id"`
			Instance string `json:"instance_id"`
			Status   string `json:"status"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(p.get("/v1/flows/approvals")), &list); err != nil {
		p.t.Fatal(err)
	}
	for _, a := range list.Approvals {
		if a.Instance != instance || a.Status != "pending" {
			continue
		}
		csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(p.get("/inbox"))
		if csrf == nil {
			p.t.Fatal("the inbox has no form")
		}
		req, _ := http.NewRequest("POST", p.base+"/web/flows/approvals/"+a.ID+"/approve", strings.NewReader(url.Values{"csrf": {csrf[1]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.base)
		resp, err := p.http.Do(req)
		if err != nil {
			p.t.Fatal(err)
		}
		resp.Body.Close()
		return true
	}
	return false
}

// TestServeDemoTour follows the README from a relative data directory:
// serve --demo prints a configuration that works, the person's first page
// has something to decide, the scripted agent walks through every part
// (the player pauses and resumes) and prints the person's decision, and a
// second start explains how to get a token instead of printing a fake one.
func TestServeDemoTour(t *testing.T) {
	t.Chdir(t.TempDir())
	cwd, _ := os.Getwd()
	s := serveInProcess(t, "--demo", "--data", "data")

	// The printed configuration.
	text := s.out.String()
	if s.dir != filepath.Join(cwd, "data") {
		t.Errorf("printed data directory %q, want the absolute %q", s.dir, filepath.Join(cwd, "data"))
	}
	if !strings.HasPrefix(s.token, "asnt_") {
		t.Fatalf("no agent token in:\n%s", text)
	}
	if strings.Contains(text, `\u003c`) || strings.Contains(text, `\u003e`) || strings.Contains(text, `\u0026`) {
		t.Errorf("HTML-escaped JSON in:\n%s", text)
	}
	if want := "ASSENT_TOKEN=" + s.token + " " + os.Args[0] + " demo agent --url " + s.base; !strings.Contains(text, want) {
		t.Errorf("welcome lacks %q:\n%s", want, text)
	}
	cfg := mcpConfig(t, text)
	if h, _ := cfg["assent"]["headers"].(map[string]any); h["Authorization"] != "Bearer "+s.token || cfg["assent"]["url"] != s.base+"/mcp" {
		t.Errorf("HTTP configuration %v", cfg["assent"])
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	stdio := cfg["assent-stdio"]
	if stdio["command"] != exe || strings.Join(anyStrings(stdio["args"]), " ") != "mcp --url "+s.base {
		t.Errorf("stdio configuration %v; want %s mcp --url %s", stdio, exe, s.base)
	}

	// The first page has a proposal and an approval; the screens page the
	// payment screen.
	p := signInPerson(t, s.base, s.link)
	inbox := p.get("/inbox")
	for _, want := range []string{"Plan", "pro", "expense-approval/approve"} {
		if !strings.Contains(inbox, want) {
			t.Errorf("the first inbox lacks %q", want)
		}
	}
	if !strings.Contains(p.get("/screens"), "Confirm payment") {
		t.Error("the screens page lacks the payment screen")
	}

	// The scripted agent, with the person approving while it waits.
	agentOut := &syncBuffer{}
	var agentErr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- executeContext(context.Background(), []string{"demo", "agent", "--url", strings.TrimPrefix(s.base, "http://"), "--token-file", s.tokenFile, "--wait", "2m"},
			strings.NewReader(""), agentOut, &agentErr)
	}()
	// The player outlives the server that started it: stop it before the
	// server (and before the data directory is removed, on failure too).
	killPlayer := func() {
		execute([]string{"run", "kill", demoPlayerRun, "--url", s.base, "--token-file", s.tokenFile}, strings.NewReader(""), io.Discard, io.Discard)
	}
	t.Cleanup(killPlayer)
	testwait.EventuallyC(t, 90*time.Second, func(c *testwait.C) {
		select {
		case code := <-done:
			t.Fatalf("demo agent exited %d before waiting:\n%s\n%s", code, agentOut.String(), agentErr.String())
		default:
		}
		if !strings.Contains(agentOut.String(), "Waiting up to") {
			c.Errorf("demo agent has not waited:\n%s", agentOut.String())
		}
	}, "the demo agent waiting")
	if !p.approve(demoExpense) {
		t.Fatal("no pending approval of the agent's expense")
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo agent exit %d:\n%s\n%s", code, agentOut.String(), agentErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("demo agent did not see the decision:\n%s", agentOut.String())
	}
	out := agentOut.String()
	for _, want := range []string{
		"as " + "p_",
		"1. Proposed a profile change: plan free → pro",
		"2. Showed you the payment screen",
		"3. Started the demo player",
		"4. Paused the player",
		"5. Resumed the player",
		"6. Asked the expense Flow (expense-1001",
		"7. You approved it: receipt rcp-",
		"look: " + s.base + "/runs/demo-player",
		"look: " + s.base + "/inbox",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo agent output lacks %q:\n%s", want, out)
		}
	}

	// A second start knows no token and says how to make one.
	killPlayer()
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	again := serveInProcess(t, "--demo", "--data", "data")
	text = again.out.String()
	if again.token != "" || strings.Contains(text, "<agent token>") || !strings.Contains(text, "token create --kind agent") ||
		strings.Contains(text, "/signin/") || !strings.Contains(text, "token link owner --data") {
		t.Errorf("second start:\n%s", text)
	}
	cfg = mcpConfig(t, text)
	if h, _ := cfg["assent"]["headers"].(map[string]any); h["Authorization"] != "Bearer "+tokenPlaceholder {
		t.Errorf("second start HTTP configuration %v", cfg["assent"])
	}
	// The seeded approval is still there, not filed twice.
	p = signInPerson(t, again.base, again.link)
	if n := strings.Count(p.get("/inbox"), "expense-1000"); n == 0 {
		t.Error("after a restart the seeded expense left the inbox")
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, e := range list {
		out[i], _ = e.(string)
	}
	return out
}

// TestDemoAgentRefusals: a step that fails names the step and the tool's
// code, and exits 1; bad flags exit 2.
func TestDemoAgentRefusals(t *testing.T) {
	// Without the demo workspace the profile form does not exist.
	url, boot, _ := startServer(t, false)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--url", url, "--token-file", writeTokenFile(t, boot.AgentToken), "--no-wait"}, exitRefused, "step 1 (propose a profile change): not_found"},
		{[]string{"--url", url, "--token-file", writeTokenFile(t, "asnt_wrong")}, exitRefused, "sign_in_required"},
		{[]string{"--url", "http://[::1", "--token-file", writeTokenFile(t, "x")}, exitUsage, "bad_url"},
		{[]string{"--url", url, "--token-file", writeTokenFile(t, "x"), "--wait", "-1s"}, exitUsage, "--wait"},
	} {
		var out, errw bytes.Buffer
		if code := execute(append([]string{"demo", "agent"}, tc.args...), strings.NewReader(""), &out, &errw); code != tc.code || !strings.Contains(errw.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errw.String(), tc.code, tc.want)
		}
	}
}

// TestDemoAgentInProcess: with --data the scripted agent runs the whole
// tour in process, and what lives in the data directory (the player Run,
// the expense's approval) is there for a server started on it afterwards.
func TestDemoAgentInProcess(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := openStore(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	code := execute([]string{"demo", "agent", "--data", dir, "--token-file", writeTokenFile(t, boot.AgentToken), "--no-wait"}, strings.NewReader(""), &out, &errw)
	s := serveInProcess(t, "--data", dir)
	t.Cleanup(func() {
		execute([]string{"run", "kill", demoPlayerRun, "--url", s.base, "--token-file", writeTokenFile(t, boot.AgentToken)}, strings.NewReader(""), io.Discard, io.Discard)
	})
	if code != 0 {
		t.Fatalf("demo agent --data: exit %d\n%s\n%s", code, out.String(), errw.String())
	}
	for _, want := range []string{"in process", "sign in (one use): http://127.0.0.1:", "4. Paused the player", "5. Resumed the player", "Not waiting (--no-wait)", "Stopped the demo player"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got := runOK(t, &served{base: s.base, token: boot.AgentToken, tokenFile: writeTokenFile(t, boot.AgentToken)}, "run", "inspect", demoPlayerRun, "--view", "trace", "--json"); !strings.Contains(got, "player.resumed") {
		t.Errorf("the player's Trace after the in-process tour: %s", got)
	}
	// The player reported to the tour's process, gone now: it was stopped.
	if got := runOK(t, &served{base: s.base, token: boot.AgentToken, tokenFile: writeTokenFile(t, boot.AgentToken)}, "run", "inspect", demoPlayerRun, "--json"); !strings.Contains(got, `"killed"`) {
		t.Errorf("the player after the in-process tour is not killed: %s", got)
	}
	p := signInPerson(t, s.base, s.link)
	if inbox := p.get("/inbox"); !strings.Contains(inbox, "expense-approval/approve") {
		t.Error("the approval the in-process agent asked for is not in the server's inbox")
	}
}

// writeTokenFile writes tok to a file of its own, for --token-file: a
// token on the command line is refused.
func writeTokenFile(t testing.TB, tok string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
