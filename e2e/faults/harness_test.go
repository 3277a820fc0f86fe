package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// long selects the long fault rounds, whose figures docs/deploy.md
// reports.
var long = flag.Bool("faults.long", false, "run the long fault rounds")

// buildAssent builds the assent binary once per test binary into a
// directory every user may read and execute, and returns its path.
func buildAssent(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts the assent binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "assent-faults-")
		if err != nil {
			buildErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		exe := filepath.Join(dir, "assent")
		out, err := exec.Command("go", "build", "-o", exe, "github.com/assent-run/assent/cmd/assent").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		builtExe = exe
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtExe
}

var (
	buildOnce sync.Once
	builtExe  string
	buildErr  error
)

// server is one `assent serve --demo` process.
type server struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	base  string
	token string
	link  string
}

// serve starts `assent serve --demo` on dir, with env added to its
// environment (ASSENT_STORE, ASSENT_NODE), and waits for its welcome
// text.
func serve(t *testing.T, exe, dir string, env ...string) *server {
	t.Helper()
	args := []string{"serve", "--demo", "--data", dir, "--addr", "127.0.0.1:0"}
	s := &server{cmd: exec.Command(exe, args...)}
	s.cmd.Env = append(append(os.Environ(), "ASSENT_STORE="), env...)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	var text string
	testwait.EventuallyC(t, 60*time.Second, func(c *testwait.C) {
		s.mu.Lock()
		text = s.out.String()
		s.mu.Unlock()
		if !strings.Contains(text, "MCP client configuration") {
			c.Errorf("output so far:\n%s", text)
		}
	}, "assent serve starting")
	if m := regexp.MustCompile(`serving on (\S+) \(`).FindStringSubmatch(text); m != nil {
		s.base = m[1]
	}
	if m := regexp.MustCompile(`shown once; keep it secret\):\n  (asnt_\S+)`).FindStringSubmatch(text); m != nil {
		s.token = m[1]
	}
	s.link = regexp.MustCompile(`http://\S+/signin/\S+`).FindString(text)
	if s.base == "" {
		t.Fatalf("the welcome text lacks the address:\n%s", text)
	}
	return s
}

// kill ends the process with SIGKILL: nothing is flushed or closed.
func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// session is a signed-in person's browser session.
type session struct {
	cookie *http.Cookie
	csrf   string
}

var client = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// signIn follows the sign-in link s printed and reads the CSRF token of
// the inbox.
func (s *server) signIn(t *testing.T) session {
	t.Helper()
	code := s.link[strings.LastIndex(s.link, "/")+1:]
	req, _ := http.NewRequest("POST", s.base+"/signin", strings.NewReader(url.Values{"link": {code}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var who session
	for _, c := range resp.Cookies() {
		if strings.Contains(strings.ToLower(c.Name), "session") {
			who.cookie = c
		}
	}
	if who.cookie == nil {
		t.Fatalf("sign in: %d, no session cookie", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", s.base+"/inbox", nil)
	req.AddCookie(who.cookie)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const meta = `name="csrf-token" content="`
	i := bytes.Index(page, []byte(meta))
	if i < 0 {
		t.Fatal("the inbox has no CSRF token")
	}
	rest := string(page[i+len(meta):])
	who.csrf = rest[:strings.IndexByte(rest, '"')]
	return who
}

// call sends a request with the agent token (or as who in the web UI)
// and decodes the JSON answer. err is set when no answer came (the
// process died or the request timed out): such a write was not
// acknowledged.
func (s *server) call(method, path, token string, who *session, body any) (int, map[string]any, error) {
	var rd io.Reader
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd, contentType = strings.NewReader(b), "text/plain"
	case url.Values:
		rd, contentType = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if who != nil {
		req.AddCookie(who.cookie)
		req.Header.Set("Origin", s.base)
		req.Header.Set("X-CSRF-Token", who.csrf)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, nil
}

// errCode returns the code of an error answer.
func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// agentTokens makes n agent tokens on dir (or the store storeURL) with
// the CLI, so that a load is not held to one principal's request rate.
func agentTokens(t *testing.T, exe, dir, storeURL string, n int) []string {
	return tokens(t, exe, dir, storeURL, "agent", n)
}

// tokens makes n tokens of kind on dir (or the store storeURL).
func tokens(t *testing.T, exe, dir, storeURL, kind string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		args := []string{"token", "create", "--data", dir, "--kind", kind, "--name", fmt.Sprintf("load-%s-%d", kind, i), "--grant", "state.write", "--json"}
		cmd := exec.Command(exe, args...)
		// The store's URL goes in the environment: a URL with a
		// password is refused on the command line.
		cmd.Env = append(os.Environ(), "ASSENT_STORE="+storeURL)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("token create: %v\n%s", err, stderr.String())
		}
		var v struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Token == "" {
			t.Fatalf("token create printed %s (%v)", b, err)
		}
		out = append(out, v.Token)
	}
	return out
}

// startInstance asks s to start a Flow instance of the demo expense
// program with id; it is the write the load tests count.
func (s *server) startInstance(token, id string) (int, map[string]any, error) {
	return s.call("POST", "/v1/flows/instances", token, nil, map[string]any{
		"program": "expense-approval", "id": id, "phase": "draft"})
}
