package notify

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"time"
)

// Options is the operator's configuration of notifications.
type Options struct {
	// SMTP is the mail server; nil sends no mail.
	SMTP *SMTP
	// Poll is how often a node looks for new pending items and due
	// messages besides what the event bus tells it (default 250 ms).
	Poll time.Duration
}

// SMTP is how to reach a mail server. The connection is upgraded with
// STARTTLS whenever the server offers it, and authenticates (PLAIN) when a
// password is set, which net/smtp allows only over TLS or to localhost.
type SMTP struct {
	// Addr is host:port.
	Addr string
	// From is the sender's address.
	From string
	// Username and Password authenticate; Username defaults to From.
	Username string
	Password string `json:"-"`
	// RootCAs, when set, are the authorities the server's certificate
	// is checked against instead of the system's (a private CA).
	RootCAs *x509.CertPool `json:"-"`
}

// ErrPasswordInURL is returned by ParseSMTPURL for a URL with a password.
var ErrPasswordInURL = errors.New("secret_on_command_line: the --smtp URL must not carry a password; set ASSENT_SMTP_PASSWORD or --smtp-password-file")

// ParseSMTPURL reads an --smtp value: smtp://[USER@]HOST:PORT. A password
// in the URL is refused (ErrPasswordInURL), since a command line is seen
// by every user of the machine.
func ParseSMTPURL(raw, from string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--smtp: %q is not a URL like smtp://HOST:PORT", raw)
	}
	if u.Scheme != "smtp" {
		return nil, fmt.Errorf("--smtp: %q must start with smtp://", raw)
	}
	if _, ok := u.User.Password(); ok {
		return nil, ErrPasswordInURL
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("--smtp: %q needs a host and a port, like smtp://mail.example.com:587", raw)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("--smtp: %q has a path or query; give only smtp://[USER@]HOST:PORT", raw)
	}
	a, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("--mail-from: %q is not a mail address", from)
	}
	s := &SMTP{Addr: u.Host, From: a.Address}
	if u.User != nil {
		s.Username = u.User.Username()
	}
	return s, nil
}
