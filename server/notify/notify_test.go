package notify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

// setup starts a server that mails through smtp and posts to hooks, with
// the owner's address set to ada@example.com.
func setup(t testing.TB, smtp *smtpServer, hooks *hookReceiver) (*assenttest.Kit, func(*server.Config)) {
	return setupPoll(t, smtp, hooks, 50*time.Millisecond)
}

// setupPoll is setup with the given poll interval (0: the default).
func setupPoll(t testing.TB, smtp *smtpServer, hooks *hookReceiver, poll time.Duration, more ...func(*server.Config)) (*assenttest.Kit, func(*server.Config)) {
	mod := func(c *server.Config) {
		c.Notify.SMTP = &notify.SMTP{Addr: smtp.Addr(), From: "assent@example.com"}
		c.Notify.Poll = poll
		for _, f := range more {
			f(c)
		}
	}
	k := assenttest.StartListening(t, mod)
	ctx := context.Background()
	if err := notifypart.SetEmail(ctx, k.DB.Settings(), k.Boot.Owner.ID, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	if hooks != nil {
		if err := k.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_test", URL: hooks.URL, Secret: hooks.Secret, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	return k, mod
}

// propose files a command proposal as the agent token and returns its id.
func propose(t testing.TB, k *assenttest.Kit, token, script string) string {
	code, v, raw := k.API("POST", "/v1/runs", token, map[string]any{"template": script})
	id, _ := v["proposal"].(string)
	if code != http.StatusAccepted || id == "" {
		t.Fatalf("propose: %d %s", code, raw)
	}
	return id
}

// mailFor waits for the mail about proposal id and returns it.
func mailFor(t testing.TB, s *smtpServer, id string) mail {
	t.Helper()
	var got mail
	testwait.Eventually(t, 10*time.Second, func() bool {
		for _, m := range s.Mails() {
			if strings.Contains(m.Data, id) {
				got = m
				return true
			}
		}
		return false
	}, "mail about "+id)
	return got
}

// decisionLink returns the link of a mail, split into what the form posts.
func decisionLink(t testing.TB, m mail) (page string, form url.Values) {
	t.Helper()
	for line := range strings.Lines(m.Data) {
		if raw, ok := strings.CutPrefix(strings.TrimSpace(line), "Decide: "); ok {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			secret := strings.TrimPrefix(u.Path, "/notify/open/")
			return u.RequestURI(), url.Values{"link": {secret}, "to": {u.Query().Get("to")}}
		}
	}
	t.Fatalf("mail has no link:\n%s", m.Data)
	return "", nil
}

func TestMailAndWebhookCarryTheDecision(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, _ := setup(t, smtp, hooks)
	id := propose(t, k, k.Token, "echo pay 1234.56 EUR to ACME")

	m := mailFor(t, smtp, id)
	if m.To != "ada@example.com" || !strings.HasPrefix(m.Subject(), "Approve command") {
		t.Errorf("mail to %q, subject %q", m.To, m.Subject())
	}
	if !strings.Contains(m.Data, "echo pay 1234.56 EUR to ACME") || !strings.Contains(m.Data, "Asked by: agent") {
		t.Errorf("mail does not carry the decision:\n%s", m.Data)
	}

	var hook receivedHook
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, bad := hooks.Got()
		if len(bad) > 0 {
			t.Fatalf("bad webhook requests: %v", bad)
		}
		for _, h := range got {
			if h.Body.Data.ItemID == id {
				hook = h
				return true
			}
		}
		return false
	}, "signed webhook")
	if hook.Body.Type == "" || hook.Body.Data.URL != k.URL()+"/runs/proposals/"+id || !strings.Contains(hook.Body.Data.Summary, "1234.56 EUR") || hook.Body.Text == "" {
		t.Errorf("webhook body = %+v", hook.Body)
	}

	// The link: a GET shows a button and uses nothing; the POST signs
	// the person in and lands on the card.
	page, form := decisionLink(t, m)
	if resp := k.Get(page, nil); resp.StatusCode != http.StatusOK || !strings.Contains(assenttest.ReadAll(resp), `action="/notify/open"`) {
		t.Fatalf("link page: %d", resp.StatusCode)
	}
	resp := k.PostForm("/notify/open", form, nil, k.URL())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/proposals/"+id {
		t.Fatalf("open: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("the link signed no one in")
	}
	card := assenttest.ReadAll(k.Get("/runs/proposals/"+id, cookie))
	if !strings.Contains(card, "echo pay 1234.56 EUR to ACME") {
		t.Errorf("card after the link does not show the proposal")
	}
	// Second use is refused.
	if resp := k.PostForm("/notify/open", form, nil, k.URL()); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("second use: %d, want 401", resp.StatusCode)
	}
	// Bound to its card: the same secret for another card is refused.
	id2 := propose(t, k, k.Token, "echo second")
	_, form2 := decisionLink(t, mailFor(t, smtp, id2))
	form2.Set("to", "/runs/proposals/"+id)
	if resp := k.PostForm("/notify/open", form2, nil, k.URL()); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("link for another card: %d, want 401", resp.StatusCode)
	}
}

func TestLinkRefusedToAnotherPerson(t *testing.T) {
	smtp := startSMTP(t)
	k, _ := setup(t, smtp, nil)
	id := propose(t, k, k.Token, "echo hello")
	_, form := decisionLink(t, mailFor(t, smtp, id))
	_, bob := k.Issue(store.KindHuman, "bob", "human.approve")
	bobCookie, _ := k.SignInAs(bob.ID)
	resp := k.PostForm("/notify/open", form, bobCookie, k.URL())
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("link opened by another person: %d, want 403", resp.StatusCode)
	}
	// A cross-site post is refused before the link is looked at.
	if resp := k.PostForm("/notify/open", form, nil, "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site open: %d", resp.StatusCode)
	}
}

func TestWebhookRetriedUntilAccepted(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 2)
	k, _ := setup(t, smtp, hooks)
	start := time.Now()
	id := propose(t, k, k.Token, "echo retry")
	testwait.Eventually(t, 30*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == id {
				return true
			}
		}
		return false
	}, "webhook after two 500s")
	if _, requests, _ := hooks.Got(); requests != 3 {
		t.Errorf("requests = %d, want 3 (two 500s, then accepted)", requests)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("third attempt after %v", d)
	}
	msgs, err := k.DB.Notify().ListMessages(context.Background(), store.MessageDelivered, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if strings.HasPrefix(m.Channel, "webhook:") && m.Attempts != 3 {
			t.Errorf("delivered after %d attempts, want 3", m.Attempts)
		}
	}
}

func TestRestartLosesNothing(t *testing.T) {
	smtp := startSMTP(t)
	hooks := startHooks(t, 0)
	// The receiver is down while the first server runs: the message is
	// claimed, fails, and waits for its retry when the server dies.
	down := hooks.URL
	hooks.Close()
	k, mod := setup(t, smtp, nil)
	ctx := context.Background()
	if err := k.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_down", URL: down, Secret: hooks.Secret, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	id := propose(t, k, k.Token, "echo survive")
	testwait.Eventually(t, 10*time.Second, func() bool {
		ms, _ := k.DB.Notify().ListMessages(ctx, store.MessagePending, 0)
		for _, m := range ms {
			if m.Attempts > 0 && m.LastError != "" {
				if strings.Contains(m.LastError, down) {
					t.Errorf("the recorded error shows the webhook's URL: %s", m.LastError)
				}
				return true
			}
		}
		return false
	}, "a failed attempt")
	// The receiver comes back on a new address; the hook is moved there
	// while no server runs.
	up := startHooks(t, 0)
	up.Secret = hooks.Secret
	up.key, _ = notify.ParseSecret(hooks.Secret)
	k2 := k.Restart(mod)
	if err := k2.DB.Notify().RemoveWebhook(ctx, "wh_down"); err != nil {
		t.Fatal(err)
	}
	if err := k2.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_down", URL: up.URL, Secret: up.Secret, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 30*time.Second, func() bool {
		got, _, _ := up.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == id {
				return true
			}
		}
		return false
	}, "webhook delivered after the restart")
}

// The mail server offers STARTTLS and wants a password: the mail goes over
// TLS, authenticated.
func TestMailOverSTARTTLSWithAuth(t *testing.T) {
	certSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer certSrv.Close()
	smtp := startSMTP(t)
	smtp.TLS = &tls.Config{Certificates: certSrv.TLS.Certificates}
	smtp.Auth = "ops\x00s3cret-pw"
	roots := x509.NewCertPool()
	roots.AddCert(certSrv.Certificate())
	k := assenttest.StartListening(t, func(c *server.Config) {
		c.Notify.SMTP = &notify.SMTP{Addr: smtp.Addr(), From: "assent@example.com", Username: "ops", Password: "s3cret-pw", RootCAs: roots}
		c.Notify.Poll = 50 * time.Millisecond
	})
	if err := notifypart.SetEmail(context.Background(), k.DB.Settings(), k.Boot.Owner.ID, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	id := propose(t, k, k.Token, "echo tls")
	if m := mailFor(t, smtp, id); m.To != "ada@example.com" {
		t.Errorf("mail to %q", m.To)
	}
}

// An item committed while no server runs (as when the process died right
// after the commit) is announced when the next server starts.
func TestItemCommittedWhileDownIsAnnounced(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, mod := setup(t, smtp, hooks)
	ctx := context.Background()
	k.Srv.Close()
	pr := store.Proposal{ID: "prop_while_down", Kind: store.ProposalSpawn, ProposerID: k.Boot.Agent.ID, Target: "run-down",
		Recipe: []byte(`{}`), Script: "echo committed while down", WorkDir: "/tmp", EnvNames: []string{}, Controls: []string{},
		CreatedAt: time.Now().UTC()}
	if err := k.DB.Proposals().CreateProposal(ctx, pr); err != nil {
		t.Fatal(err)
	}
	k.Restart(mod)
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == pr.ID {
				return true
			}
		}
		return false
	}, "webhook about the item committed while down")
	mailFor(t, smtp, pr.ID)
}

// A message still waiting for a retry when a person decides its item is
// not sent: nobody needs to hear of a decision already made.
func TestDecidedItemNotSent(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 1)
	k, _ := setup(t, smtp, hooks)
	ctx := context.Background()
	id := propose(t, k, k.Token, "echo decided first")
	testwait.Eventually(t, 10*time.Second, func() bool {
		_, requests, _ := hooks.Got()
		return requests == 1
	}, "the first, refused, attempt")
	cookie, csrf := k.SignIn()
	if resp := k.PostForm("/runs/proposals/"+id+"/decline", url.Values{"csrf": {csrf}, "reason": {"no"}}, cookie, k.URL()); resp.StatusCode >= 400 {
		t.Fatalf("decline: %d", resp.StatusCode)
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		ms, _ := k.DB.Notify().ListMessages(ctx, store.MessageDelivered, 0)
		for _, m := range ms {
			if strings.HasPrefix(m.Channel, "webhook:") && strings.Contains(m.LastError, "decided before delivery") {
				return true
			}
		}
		return false
	}, "the retry skipped")
	if got, requests, _ := hooks.Got(); len(got) != 0 || requests != 1 {
		t.Errorf("receiver got %d messages in %d requests after the decision", len(got), requests)
	}
}
