package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
)

// newTokenLinkCmd prints a fresh one-time sign-in link for a person. It
// works on the data directory, so a running server accepts the link
// without a restart.
func newTokenLinkCmd(c *cli) *cobra.Command {
	var base string
	cmd := storeCommand(&cobra.Command{
		Use:     "link NAME",
		Short:   "Print a fresh one-time sign-in link for the person NAME",
		Example: "  assent token link alice",
		Args:    usageArgs(cobra.ExactArgs(1)),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		ps, err := db.Principals().ListPrincipals(ctx)
		if err != nil {
			return refused("%v", err)
		}
		found, ok, ambiguous := findPerson(ps, args[0])
		if ambiguous {
			return refused("ambiguous_name: more than one person is named %q; give the person's id instead (assent token list shows ids)", args[0])
		}
		if !ok {
			return refused("not_found: no active person named %q (assent token list shows them; assent token create --kind human --name %s adds one)", args[0], args[0])
		}
		link, err := auth.NewSignInLink(ctx, db.Sessions(), found.ID, linkBase(ctx, db.Settings(), base), time.Now())
		if err != nil {
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Sign-in link for %s (one use, within 15 minutes):\n  %s\n", found.Name, link)
		return nil
	})
	cmd.Flags().StringVar(&base, "base-url", "", "server URL for the link (default: where assent serve on this store last listened, else "+defaultURL+")")
	return cmd
}
