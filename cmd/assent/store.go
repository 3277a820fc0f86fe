package main

import (
	"context"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
)

// storeFlagUsage is the help of --store on the commands that open the
// store themselves.
const storeFlagUsage = "PostgreSQL URL of the server's store without a password, postgres://USER@HOST:PORT/DATABASE (default $ASSENT_STORE, else SQLite in the data directory); give the password through ASSENT_STORE, PGPASSFILE or --store-file"

// storeFileUsage is the help of --store-file.
const storeFileUsage = "file holding the PostgreSQL URL of the store, password included (keep it 0600); instead of --store"

// storeFlags are --store and --store-file.
type storeFlags struct {
	url, file string
}

// add adds --store and --store-file to f.
func (s *storeFlags) add(f *pflag.FlagSet, usage string) {
	f.StringVar(&s.url, "store", "", usage)
	f.StringVar(&s.file, "store-file", "", storeFileUsage)
}

// resolve returns the PostgreSQL URL the command uses: --store, else the
// first line of --store-file, else $ASSENT_STORE; "" for SQLite. A
// password on the command line is refused: every process on the machine
// may read another's command line (/proc/PID/cmdline, ps).
func (s storeFlags) resolve() (string, error) {
	if s.url != "" && s.file != "" {
		return "", usageErr("bad_store: --store and --store-file exclude each other: pass one")
	}
	if s.url != "" {
		if secretInURL(s.url) {
			return "", usageErr("%s: --store carries a password, which any process on this machine can read from the command line; put the URL in ASSENT_STORE, or in a file passed as --store-file FILE, or keep the password in a PGPASSFILE and leave it out of the URL", codeSecretOnCommandLine)
		}
		return s.url, nil
	}
	if s.file != "" {
		b, err := os.ReadFile(s.file)
		if err != nil {
			return "", refused("bad_store_file: cannot read --store-file %s: %v; write the PostgreSQL URL on its first line", s.file, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			return "", refused("bad_store_file: --store-file %s is empty; write the PostgreSQL URL on its first line", s.file)
		}
		return line, nil
	}
	return os.Getenv("ASSENT_STORE"), nil
}

// codeSecretOnCommandLine refuses a secret given as a command-line flag.
const codeSecretOnCommandLine = "secret_on_command_line"

// secretInURL reports whether a store URL carries a password, in its user
// part or as a password parameter.
func secretInURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		// Not a URL we can read: look for the markers by hand.
		rest := raw
		if i := strings.Index(rest, "://"); i >= 0 {
			rest = rest[i+3:]
		}
		host, _, _ := strings.Cut(rest, "/")
		return strings.Contains(host, ":") && strings.Contains(host, "@") || strings.Contains(strings.ToLower(raw), "password=")
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	for k := range u.Query() {
		if strings.EqualFold(k, "password") {
			return true
		}
	}
	return false
}

// addDataFlags adds --data, --store and --store-file to f.
func addDataFlags(f *pflag.FlagSet, data *string, st *storeFlags) {
	f.StringVar(data, "data", "", "data directory (default $ASSENT_DATA or ./assent-data)")
	st.add(f, storeFlagUsage)
}

// openCommandStore opens the store a command works on, the one its server
// uses: PostgreSQL when --store, --store-file or $ASSENT_STORE names one,
// otherwise SQLite in the data directory, which must exist unless create
// is set.
func openCommandStore(ctx context.Context, data string, st storeFlags, create bool) (store.Store, error) {
	u, err := st.resolve()
	if err != nil {
		return nil, err
	}
	if u != "" {
		return openPostgres(ctx, u)
	}
	return openStore(ctx, dataDir(data), create)
}

// openPostgres opens the PostgreSQL store at rawURL. Errors carry a stable
// code and never show the password.
func openPostgres(ctx context.Context, rawURL string) (store.Store, error) {
	if !postgres.IsURL(rawURL) {
		return nil, badStoreURL(rawURL)
	}
	db, err := postgres.Open(ctx, rawURL)
	if err != nil {
		return nil, refused("%v", err)
	}
	return db, nil
}

// badStoreURL is the refusal of a --store that is not a PostgreSQL URL.
func badStoreURL(rawURL string) error {
	return refused("%s: --store, --store-file and ASSENT_STORE take a PostgreSQL URL, postgres://USER@HOST:PORT/DATABASE, not %q; leave them unset for SQLite in the data directory",
		postgres.CodeURLInvalid, postgres.Redact(rawURL))
}
