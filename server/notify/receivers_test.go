package notify_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/notify"
)

// mail is one message the test's SMTP server received.
type mail struct {
	From, To string
	Data     string
	At       time.Time
}

// Subject returns the message's Subject header.
func (m mail) Subject() string {
	for line := range strings.Lines(m.Data) {
		if s, ok := strings.CutPrefix(line, "Subject: "); ok {
			dec, err := new(mime.WordDecoder).DecodeHeader(strings.TrimSpace(s))
			if err != nil {
				return "undecodable: " + s
			}
			return dec
		}
	}
	return ""
}

// smtpServer is a small SMTP server that accepts every message: enough of
// RFC 5321 (EHLO, MAIL, RCPT, DATA, QUIT, RSET, NOOP) for net/smtp.
type smtpServer struct {
	// TLS, when set, is offered by STARTTLS; Auth, when set, is the
	// "user\x00password" AUTH PLAIN must give before MAIL.
	TLS  *tls.Config
	Auth string
	ln   net.Listener
	mu   sync.Mutex
	got  []mail
	wake chan struct{}
}

func startSMTP(t testing.TB) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln, wake: make(chan struct{}, 1)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *smtpServer) Addr() string { return s.ln.Addr().String() }

func (s *smtpServer) serve(c net.Conn) {
	defer func() { c.Close() }()
	tp := textproto.NewConn(c)
	tp.PrintfLine("220 test ESMTP")
	var m mail
	secure, authed := false, s.Auth == ""
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			switch {
			case s.TLS != nil && !secure:
				tp.PrintfLine("250-test\r\n250-8BITMIME\r\n250 STARTTLS")
			case s.Auth != "":
				tp.PrintfLine("250-test\r\n250-8BITMIME\r\n250 AUTH PLAIN")
			default:
				tp.PrintfLine("250-test\r\n250 8BITMIME")
			}
		case "STARTTLS":
			tp.PrintfLine("220 go ahead")
			tc := tls.Server(c, s.TLS)
			if tc.Handshake() != nil {
				return
			}
			c, tp, secure = tc, textproto.NewConn(tc), true
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			dec, _ := base64.StdEncoding.DecodeString(resp)
			if !secure || mech != "PLAIN" || string(dec) != "\x00"+s.Auth {
				tp.PrintfLine("535 authentication failed")
				continue
			}
			authed = true
			tp.PrintfLine("235 ok")
		case "MAIL":
			if !authed || (s.TLS != nil && !secure) {
				tp.PrintfLine("530 authenticate first")
				continue
			}
			m = mail{From: arg}
			tp.PrintfLine("250 ok")
		case "RCPT":
			m.To = strings.Trim(strings.TrimPrefix(arg, "TO:"), "<>")
			tp.PrintfLine("250 ok")
		case "DATA":
			tp.PrintfLine("354 go on")
			b, err := io.ReadAll(tp.DotReader())
			if err != nil {
				return
			}
			m.Data, m.At = string(b), time.Now()
			s.mu.Lock()
			s.got = append(s.got, m)
			s.mu.Unlock()
			select {
			case s.wake <- struct{}{}:
			default:
			}
			tp.PrintfLine("250 queued")
		case "QUIT":
			tp.PrintfLine("221 bye")
			return
		default:
			tp.PrintfLine("250 ok")
		}
	}
}

// Mails returns what the server received so far.
func (s *smtpServer) Mails() []mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mail(nil), s.got...)
}

// hookReceiver is a webhook receiver that verifies every signature and
// drops duplicates by message id, as the docs tell a receiver to.
type hookReceiver struct {
	*httptest.Server
	Secret string
	key    []byte

	mu       sync.Mutex
	fail     int // answer 500 to this many requests first
	requests int
	byID     map[string]receivedHook
	bad      []string
}

type receivedHook struct {
	Body notify.Payload
	At   time.Time
}

func startHooks(t testing.TB, fail int) *hookReceiver {
	h := &hookReceiver{Secret: notify.NewSecret(), fail: fail, byID: map[string]receivedHook{}}
	var err error
	if h.key, err = notify.ParseSecret(h.Secret); err != nil {
		t.Fatal(err)
	}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(bufio.NewReader(r.Body))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	if h.fail > 0 {
		h.fail--
		http.Error(w, "try later", http.StatusInternalServerError)
		return
	}
	id, err := notify.Verify(h.key, r.Header, body, time.Now())
	if err != nil {
		h.bad = append(h.bad, err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		h.bad = append(h.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, dup := h.byID[id]; !dup {
		h.byID[id] = receivedHook{Body: p, At: time.Now()}
	}
	w.WriteHeader(http.StatusNoContent)
}

// Got returns the distinct messages received, the requests made and the
// requests refused for a bad signature.
func (h *hookReceiver) Got() (map[string]receivedHook, int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]receivedHook, len(h.byID))
	for k, v := range h.byID {
		out[k] = v
	}
	return out, h.requests, append([]string(nil), h.bad...)
}
