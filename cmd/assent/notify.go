package main

import (
	"errors"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/assent-run/assent/notify"
)

// mailFlags are serve's flags for the mail server.
type mailFlags struct {
	url, from, passwordFile string
}

func (m *mailFlags) add(f *pflag.FlagSet) {
	f.StringVar(&m.url, "smtp", "", "mail server for notifications: smtp://[USER@]HOST:PORT (STARTTLS when offered; never a password here)")
	f.StringVar(&m.from, "mail-from", "", "sender address of notification mail (required with --smtp)")
	f.StringVar(&m.passwordFile, "smtp-password-file", "", "file whose first line is the SMTP password (default $ASSENT_SMTP_PASSWORD)")
}

// resolve returns the mail server the flags name, nil when --smtp is not
// given. A password in the URL is refused, as --store refuses one.
func (m *mailFlags) resolve() (*notify.SMTP, error) {
	if m.url == "" {
		if m.from != "" || m.passwordFile != "" {
			return nil, usageErr("--mail-from and --smtp-password-file need --smtp smtp://HOST:PORT")
		}
		return nil, nil
	}
	if m.from == "" {
		return nil, usageErr("--smtp needs --mail-from ADDRESS, the sender of notification mail")
	}
	cfg, err := notify.ParseSMTPURL(m.url, m.from)
	if errors.Is(err, notify.ErrPasswordInURL) {
		return nil, usageErr("%s: --smtp must not carry a password (a command line is visible to every user of the machine); set ASSENT_SMTP_PASSWORD or --smtp-password-file", codeSecretOnCommandLine)
	}
	if err != nil {
		return nil, refused("bad_smtp: %v", err)
	}
	cfg.Password = os.Getenv("ASSENT_SMTP_PASSWORD")
	if m.passwordFile != "" {
		b, err := os.ReadFile(m.passwordFile)
		if err != nil {
			return nil, refused("bad_smtp_password_file: cannot read --smtp-password-file: %v", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if cfg.Password = strings.TrimSpace(line); cfg.Password == "" {
			return nil, refused("bad_smtp_password_file: %s is empty; write the password on its first line", m.passwordFile)
		}
	}
	return cfg, nil
}
