package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
)

// storeFlagUsage is the help of --store on the commands that open the
// store themselves.
const storeFlagUsage = "PostgreSQL URL of the server's store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default $ASSENT_STORE, else SQLite in the data directory)"

// addDataFlags adds --data and --store to f.
func addDataFlags(f *pflag.FlagSet, data, storeFlag *string) {
	f.StringVar(data, "data", "", "data directory (default $ASSENT_DATA or ./assent-data)")
	f.StringVar(storeFlag, "store", "", storeFlagUsage)
}

// openCommandStore opens the store a command works on, the one its server
// uses: PostgreSQL when --store (or $ASSENT_STORE) names one, otherwise
// SQLite in the data directory, which must exist unless create is set.
func openCommandStore(ctx context.Context, data, storeFlag string, create bool) (store.Store, error) {
	if u := storeURL(storeFlag); u != "" {
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
	return refused("%s: --store (or ASSENT_STORE) takes a PostgreSQL URL, postgres://USER:PASSWORD@HOST:PORT/DATABASE, not %q; leave it unset for SQLite in the data directory",
		postgres.CodeURLInvalid, postgres.Redact(rawURL))
}
