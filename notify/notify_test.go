package notify

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNextAttempt(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		want     time.Duration
		ok       bool
	}{
		{1, time.Second, true},
		{2, 2 * time.Second, true},
		{3, 4 * time.Second, true},
		{15, MaxWait, true},
		{MaxAttempts - 1, MaxWait, true},
		{MaxAttempts, 0, false},
	} {
		got, ok := NextAttempt(tc.attempts)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NextAttempt(%d) = %v, %v; want %v, %v", tc.attempts, got, ok, tc.want, tc.ok)
		}
	}
	// The third attempt comes within a minute of the first.
	a, _ := NextAttempt(1)
	b, _ := NextAttempt(2)
	if a+b > time.Minute {
		t.Errorf("third attempt after %v", a+b)
	}
}

func TestSignVerify(t *testing.T) {
	secret := NewSecret()
	key, err := ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"decision.pending"}`)
	h := http.Header{}
	SetHeaders(h, key, "msg_1", now, body)
	if id, err := Verify(key, h, body, now.Add(time.Minute)); err != nil || id != "msg_1" {
		t.Fatalf("Verify = %q, %v", id, err)
	}
	for name, tc := range map[string]struct {
		body []byte
		now  time.Time
		key  []byte
		want error
	}{
		"changed body": {[]byte(`{}`), now, key, ErrBadSignature},
		"other key":    {body, now, []byte("another key of 24 bytes!"), ErrBadSignature},
		"stale":        {body, now.Add(time.Hour), key, ErrStale},
	} {
		if _, err := Verify(tc.key, h, tc.body, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify err = %v, want %v", name, err, tc.want)
		}
	}
}

// The signature is the one the specification's example computes by hand:
// HMAC-SHA256 over "id.timestamp.body", base64, prefixed "v1,".
func TestSignFormat(t *testing.T) {
	key := []byte("0123456789abcdef01234567")
	sig := Sign(key, "id", time.Unix(10, 0), []byte("b"))
	enc, ok := strings.CutPrefix(sig, "v1,")
	if !ok {
		t.Fatalf("signature %q lacks v1,", sig)
	}
	if raw, err := base64.StdEncoding.DecodeString(enc); err != nil || len(raw) != 32 {
		t.Fatalf("signature %q is not base64 of 32 bytes: %v", sig, err)
	}
	if Sign(key, "id", time.Unix(10, 0), []byte("c")) == sig {
		t.Fatal("signature does not depend on the body")
	}
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "abc", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := ParseSecret(s); !errors.Is(err, ErrBadSecret) {
			t.Errorf("ParseSecret(%q) err = %v", s, err)
		}
	}
}

func TestWebhookBody(t *testing.T) {
	it := Item{Kind: KindRunProposal, ID: "p1", Title: "Run deploy.sh", Summary: "Pay 1 234.56 EUR to ACME", Agent: "bot", URL: "https://a.example/p/p1"}
	b, err := WebhookBody("m1", it, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type, ID, Text string
		Data           struct{ URL, Summary string }
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type == "" || got.ID != "m1" || got.Data.URL != it.URL || got.Data.Summary != it.Summary || !strings.Contains(got.Text, it.Summary) {
		t.Fatalf("body = %s", b)
	}
}

func FuzzVerify(f *testing.F) {
	key := []byte("0123456789abcdef01234567")
	f.Add("msg_1", "1700000000", "v1,abc", []byte("{}"))
	f.Add("", "x", "", []byte(nil))
	f.Add("m", "-99999999999999", "v1,a v1,b", []byte("body"))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		if got, err := Verify(key, h, body, time.Unix(1_700_000_000, 0)); err == nil && got != id {
			t.Fatalf("accepted with id %q, header %q", got, id)
		}
	})
}

func FuzzParseSecret(f *testing.F) {
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	f.Add("whsec_")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if key, err := ParseSecret(s); err == nil && len(key) < 24 {
			t.Fatalf("accepted a key of %d bytes", len(key))
		}
	})
}

func TestParseSMTPURL(t *testing.T) {
	good, err := ParseSMTPURL("smtp://ops@mail.example.com:587", "assent@example.com")
	if err != nil || good.Addr != "mail.example.com:587" || good.Username != "ops" || good.From != "assent@example.com" {
		t.Fatalf("ParseSMTPURL = %+v, %v", good, err)
	}
	if _, err := ParseSMTPURL("smtp://ops:hunter2@mail.example.com:587", "a@example.com"); !errors.Is(err, ErrPasswordInURL) {
		t.Errorf("password in URL: err = %v", err)
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error leaks the password: %v", err)
	}
	for _, raw := range []string{"", "mail.example.com:25", "http://h:25", "smtp://h", "smtp://:25", "smtp://h:25/x"} {
		if _, err := ParseSMTPURL(raw, "a@example.com"); err == nil {
			t.Errorf("ParseSMTPURL(%q) accepted", raw)
		}
	}
	if _, err := ParseSMTPURL("smtp://h:25", "not an address"); err == nil {
		t.Error("bad --mail-from accepted")
	}
}

func FuzzParseSMTPURL(f *testing.F) {
	f.Add("smtp://ops@mail.example.com:587", "a@example.com")
	f.Add("smtp://u:p@h:1", "x")
	f.Add("%", "")
	f.Fuzz(func(t *testing.T, raw, from string) {
		s, err := ParseSMTPURL(raw, from)
		if err != nil {
			return
		}
		if s.Password != "" || s.Addr == "" || s.From == "" {
			t.Fatalf("accepted %q as %+v", raw, s)
		}
	})
}
