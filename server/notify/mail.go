package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"mime"
	"net"
	"net/smtp"
	"strings"
	"time"

	"github.com/assent-run/assent/notify"
)

// mailTimeout bounds one mail delivery, well within the claim's lease.
const mailTimeout = 30 * time.Second

// sendMail mails it to the person id with a link that signs them in and
// opens the card.
func (p *Part) sendMail(ctx context.Context, id string, it notify.Item) error {
	cfg := p.Options.SMTP
	if cfg == nil {
		return permanent{fmt.Errorf("no mail server is configured (--smtp)")}
	}
	to, err := Email(ctx, p.Store.Settings, id)
	if err != nil {
		return err
	}
	if to == "" {
		return permanent{fmt.Errorf("person %s has no mail address", id)}
	}
	link, err := p.decisionLink(ctx, id, strings.TrimPrefix(it.URL, p.BaseURL))
	if err != nil {
		return fmt.Errorf("decision link: %w", err)
	}
	it.URL = link
	msg := mailMessage(cfg.From, to, it, p.Now())
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
	defer cancel()
	return sendSMTP(ctx, cfg, to, msg)
}

// mailMessage builds the message: a subject that starts with the
// decision's title, and the decision in plain text.
func mailMessage(from, to string, it notify.Item, now time.Time) []byte {
	var b bytes.Buffer
	subject := it.Title
	if it.Agent != "" {
		subject += " (asked by " + it.Agent + ")"
	}
	fmt.Fprintf(&b, "From: %s\r\n", from)
	fmt.Fprintf(&b, "To: %s\r\n", to)
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&b, "Date: %s\r\n", now.UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@assent>\r\n", strings.ReplaceAll(it.Key(), ":", "."))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	// Lines end in CRLF; the SMTP client's DATA writer escapes a line
	// that starts with a dot.
	for line := range strings.Lines(it.Text()) {
		b.WriteString(strings.TrimRight(line, "\r\n") + "\r\n")
	}
	b.WriteString("\r\nThe link signs you in once, within 15 minutes; the decision itself is a click on the card.\r\n")
	return b.Bytes()
}

// sendSMTP delivers msg through cfg's server: STARTTLS when the server
// offers it, PLAIN authentication when a password is set.
func sendSMTP(ctx context.Context, cfg *notify.SMTP, to string, msg []byte) error {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return permanent{fmt.Errorf("smtp address %q: %w", cfg.Addr, err)}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, RootCAs: cfg.RootCAs}); err != nil {
			return fmt.Errorf("smtp starttls: %w", err)
		}
	}
	if cfg.Password != "" {
		user := cfg.Username
		if user == "" {
			user = cfg.From
		}
		if err := c.Auth(smtp.PlainAuth("", user, cfg.Password, host)); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.Mail(cfg.From); err != nil {
		return fmt.Errorf("smtp from: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp to: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	return c.Quit()
}
