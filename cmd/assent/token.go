package main

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/flow"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/store"
)

func newTokenCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke principals and their bearer tokens (offline, on the server's store: --data or --store)",
		Example: `  assent token create --kind agent --name planner --grant control.write
  assent token list
  assent token revoke p_0123456789abcdef0123`,
	}
	cmd.AddCommand(newTokenCreateCmd(c), newTokenListCmd(c), newTokenRevokeCmd(c))
	cmd.AddCommand(newTokenLinkCmd(c))
	return cmd
}

func newTokenCreateCmd(c *cli) *cobra.Command {
	var (
		kind, name, base, email string
		grants, forNames        []string
		asJSON                  bool
	)
	cmd := storeCommand(&cobra.Command{
		Use:   "create",
		Short: "Create a principal and print its token once",
		Long: `Create a principal (a person, an agent or a service) with a new bearer token.
The token is printed once; only its SHA-256 hash is stored. For a person, a
one-time sign-in link for the web UI is printed too.`,
		Example: `  assent token create --kind agent --name planner
  assent token create --kind service --name billing --grant tool.invoke,state.write
  assent token create --kind human --name alice --grant human.approve
  assent token create --kind human --name ada --email ada@example.com
  assent token create --kind agent --name triage --for alice,owner`,
		Args: usageArgs(cobra.NoArgs),
	}, true, func([]string) error {
		switch kind {
		case store.KindHuman, store.KindAgent, store.KindService:
		default:
			return usageErr("--kind must be human, agent or service")
		}
		if strings.TrimSpace(name) == "" {
			return usageErr("--name is required")
		}
		if email != "" && kind != store.KindHuman {
			return usageErr("--email is for a person (--kind human): decisions are mailed to people")
		}
		if email != "" {
			if a, err := mail.ParseAddress(email); err != nil || a.Name != "" {
				return usageErr("--email %q is not a plain mail address like ada@example.com", email)
			}
		}
		return nil
	}, func(ctx context.Context, db store.Store, _ []string) error {
		sup, err := supervisorIDs(ctx, db.Principals(), splitList(forNames))
		if err != nil {
			return err
		}
		all, err := db.Principals().ListPrincipals(ctx)
		if err != nil {
			return refused("%v", err)
		}
		// People are found by name (token link, --for), so two of one
		// name are refused; an agent's or service's name only labels it.
		if other, ok := sameName(all, kind, name); ok {
			if kind == store.KindHuman {
				return refused("already_exists: a person named %q exists (%s); choose another --name, or revoke that one first", name, other.ID)
			}
			fmt.Fprintf(c.err, "assent: note: another %s is named %q (%s); pages and lists will show both under that name\n", kind, name, other.ID)
		}
		for _, g := range splitList(grants) {
			if !slices.Contains(knownGrants, g) {
				fmt.Fprintf(c.err, "assent: note: %q is not a capability the runtime checks (%s); it counts only where an application defines it\n", g, strings.Join(knownGrants, ", "))
			}
		}
		tok, p, err := auth.IssueTokenFor(ctx, db, kind, name, splitList(grants), sup, time.Now())
		if err != nil {
			return refused("%v", err)
		}
		if email != "" {
			if err := notifypart.SetEmail(ctx, db.Settings(), p.ID, email); err != nil {
				return refused("bad_email: %v", err)
			}
		}
		var link string
		if kind == store.KindHuman {
			if link, err = auth.NewSignInLink(ctx, db.Sessions(), p.ID, linkBase(ctx, db.Settings(), base), time.Now()); err != nil {
				return refused("%v", err)
			}
		}
		if asJSON {
			out := map[string]any{"principal": p, "token": tok}
			if link != "" {
				out["signInLink"] = link
			}
			return printJSON(c.out, out)
		}
		fmt.Fprintf(c.out, "Created %s %q (%s).\nToken (shown once; keep it secret):\n  %s\n", p.Kind, p.Name, p.ID, tok)
		if link != "" {
			fmt.Fprintf(c.out, "Sign-in link (one use, within 15 minutes):\n  %s\n", link)
		}
		return nil
	})
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "human, agent or service (required)")
	f.StringVar(&name, "name", "", "a name people will recognise (required)")
	f.StringSliceVar(&grants, "grant", nil, "capabilities to grant, comma-separated or repeated")
	f.StringSliceVar(&forNames, "for", nil, "people (name or id) who supervise an agent or service (default the owner)")
	f.StringVar(&email, "email", "", "a person's mail address, where pending decisions are mailed (serve --smtp)")
	f.StringVar(&base, "base-url", "", "server URL for a person's sign-in link (default: where assent serve on this store last listened, else "+defaultURL+")")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTokenListCmd(c *cli) *cobra.Command {
	var asJSON bool
	cmd := storeCommand(&cobra.Command{
		Use:     "list",
		Short:   "List principals (never their tokens)",
		Example: "  assent token list\n  assent token list --json",
		Args:    usageArgs(cobra.NoArgs),
	}, false, nil, func(ctx context.Context, db store.Store, _ []string) error {
		ps, err := db.Principals().ListPrincipals(ctx)
		if err != nil {
			return refused("%v", err)
		}
		if asJSON {
			if ps == nil {
				ps = []store.Principal{}
			}
			return printJSON(c.out, ps)
		}
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tNAME\tGRANTS\tCREATED\tSTATE")
		for _, p := range ps {
			state := "active"
			if p.Revoked {
				state = "revoked"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Kind, p.Name, strings.Join(p.Grants, ","), p.CreatedAt.Format(time.RFC3339), state)
		}
		return tw.Flush()
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTokenRevokeCmd(c *cli) *cobra.Command {
	return storeCommand(&cobra.Command{
		Use:     "revoke PRINCIPAL_ID",
		Short:   "Revoke a principal's tokens and web sessions",
		Example: "  assent token revoke p_0123456789abcdef0123",
		Args:    usageArgs(cobra.ExactArgs(1)),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		if err := db.Principals().RevokePrincipal(ctx, args[0]); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return refused("not_found: no active principal %q (assent token list shows them)", args[0])
			}
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Revoked %s.\n", args[0])
		return nil
	})
}

// splitList flattens repeated and comma-separated flag values.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// supervisorIDs resolves people named by name or id to their ids.
func supervisorIDs(ctx context.Context, st store.Principals, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	all, err := st.ListPrincipals(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, n := range names {
		p, ok, ambiguous := findPerson(all, n)
		if ambiguous {
			return nil, refused("ambiguous_name: more than one person is named %q; name the supervisor by id (assent token list shows ids)", n)
		}
		if !ok {
			return nil, refused("unknown_supervisor: no person is named %q; list people with `assent token list`", n)
		}
		ids = append(ids, p.ID)
	}
	return ids, nil
}

// findPerson returns the active person whose id, or else whose name, is
// nameOrID. A name two people share finds neither (ambiguous is set), so
// that nothing goes to the wrong person.
func findPerson(all []store.Principal, nameOrID string) (found store.Principal, ok, ambiguous bool) {
	var named []store.Principal
	for _, p := range all {
		if p.Kind != store.KindHuman || p.Revoked {
			continue
		}
		if p.ID == nameOrID {
			return p, true, false
		}
		if p.Name == nameOrID {
			named = append(named, p)
		}
	}
	switch len(named) {
	case 0:
		return store.Principal{}, false, false
	case 1:
		return named[0], true, false
	}
	return store.Principal{}, false, true
}

// sameName returns the active principal of kind named name, if any.
func sameName(all []store.Principal, kind, name string) (store.Principal, bool) {
	for _, p := range all {
		if p.Kind == kind && !p.Revoked && p.Name == name {
			return p, true
		}
	}
	return store.Principal{}, false
}

// knownGrants are the capabilities the runtime itself checks; an
// application may define more.
var knownGrants = []string{
	flow.CapabilityStateWrite, flow.CapabilityCommandExecute, flow.CapabilityToolInvoke,
	flow.CapabilityControlWrite, flow.CapabilityHumanApprove, flow.CapabilityFlowLoad, flow.AuthorityPolicy,
}

// settingServedURL is the setting under which assent serve records the
// URL it serves.
const settingServedURL = "served_url"

// linkBase returns the server URL the sign-in links printed on st point
// to: flag when set, else the URL the latest assent serve on st recorded,
// else defaultURL.
func linkBase(ctx context.Context, st store.Settings, flag string) string {
	if flag != "" {
		return flag
	}
	if u, err := st.Setting(ctx, settingServedURL); err == nil && u != "" {
		return u
	}
	return defaultURL
}
