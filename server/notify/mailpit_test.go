package notify_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
)

// mailpitBinary finds the mailpit binary on PATH or in GOPATH/bin. The
// test skips without it, unless ASSENT_REQUIRE_MAILPIT=1 (as in CI).
func mailpitBinary(t *testing.T) string {
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	if p := filepath.Join(gopath, "bin", "mailpit"); gopath != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("ASSENT_REQUIRE_MAILPIT") == "1" {
		t.Fatal("mailpit is required (ASSENT_REQUIRE_MAILPIT=1) but is neither on PATH nor in GOPATH/bin; see .ci/run")
	}
	t.Skip("mailpit is not installed; go install github.com/axllent/mailpit@v1.33.1 to run this test")
	return ""
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// mailpitMessages is what mailpit's API lists.
type mailpitMessages struct {
	Total    int `json:"total"`
	Messages []struct {
		ID      string `json:"ID"`
		Subject string `json:"Subject"`
		To      []struct {
			Address string `json:"Address"`
		} `json:"To"`
	} `json:"messages"`
}

// A proposal is mailed, with SMTP authentication, through a real mail
// server; its API lists the message with the decision's title.
func TestMailThroughMailpit(t *testing.T) {
	bin := mailpitBinary(t)
	smtpAddr, httpAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--smtp", smtpAddr, "--listen", httpAddr,
		"--database", filepath.Join(t.TempDir(), "mailpit.db"), "--smtp-auth-accept-any", "--smtp-auth-allow-insecure",
		"--disable-version-check", "--quiet")
	out, err := os.Create(filepath.Join(t.TempDir(), "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		out.Close()
	})
	api := "http://" + httpAddr + "/api/v1/messages"
	list := func() (mailpitMessages, bool) {
		var m mailpitMessages
		resp, err := http.Get(api)
		if err != nil {
			return m, false
		}
		defer resp.Body.Close()
		return m, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&m) == nil
	}
	testwait.Eventually(t, 20*time.Second, func() bool { _, ok := list(); return ok }, "mailpit answering")

	k := assenttest.StartListening(t, func(c *server.Config) {
		c.Notify.SMTP = &notify.SMTP{Addr: smtpAddr, From: "assent@example.com", Password: "pw"}
		c.Notify.Poll = 50 * time.Millisecond
	})
	if err := notifypart.SetEmail(context.Background(), k.DB.Settings(), k.Boot.Owner.ID, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	propose(t, k, k.Token, "echo through mailpit")
	var got mailpitMessages
	testwait.Eventually(t, 20*time.Second, func() bool {
		m, ok := list()
		got = m
		return ok && m.Total >= 1
	}, "the mail in mailpit")
	msg := got.Messages[0]
	if !strings.HasPrefix(msg.Subject, "Approve command") || len(msg.To) != 1 || msg.To[0].Address != "ada@example.com" {
		t.Errorf("mailpit got %+v", msg)
	}
	resp, err := http.Get("http://" + httpAddr + "/api/v1/message/" + msg.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var full struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&full); err != nil || !strings.Contains(full.Text, "echo through mailpit") || !strings.Contains(full.Text, "/notify/open/") {
		t.Errorf("mail text lacks the decision or its link (%v):\n%s", err, full.Text)
	}
}
