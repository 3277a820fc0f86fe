package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

func newWebhookCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Add, list and remove the webhooks pending decisions are posted to; see and replay dead letters (offline, on the server's store: --data or --store)",
		Example: `  assent webhook add --url https://hooks.example.com/assent --secret-file /etc/assent/webhook-secret
  assent webhook list
  assent webhook dead
  assent webhook replay msg_0123456789abcdef01234567`,
	}
	cmd.AddCommand(newWebhookAddCmd(c), newWebhookListCmd(c), newWebhookRemoveCmd(c), newWebhookDeadCmd(c), newWebhookReplayCmd(c))
	return cmd
}

func newWebhookAddCmd(c *cli) *cobra.Command {
	var rawURL, secretFile string
	var u *url.URL
	var secret string
	cmd := storeCommand(&cobra.Command{
		Use:   "add",
		Short: "Post every pending decision, signed, to a URL",
		Long: `Add an outgoing webhook. Every pending decision is posted to it as JSON,
signed as the Standard Webhooks specification says (webhook-id,
webhook-timestamp, webhook-signature) with the secret in --secret-file:
"whsec_" followed by base64 of at least 24 random bytes, for example
  printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" > secret
The body's "text" field makes it a message a Slack-compatible incoming
webhook posts as it is.`,
		Example: "  assent webhook add --url https://hooks.example.com/assent --secret-file /etc/assent/webhook-secret",
		Args:    usageArgs(cobra.NoArgs),
	}, true, func([]string) error {
		var err error
		u, err = url.Parse(rawURL)
		if rawURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return usageErr("--url must be an http or https URL, like https://hooks.example.com/assent")
		}
		if u.User != nil {
			return usageErr("%s: --url must not carry a user or password; put the receiver's credentials in its path or use the signature", codeSecretOnCommandLine)
		}
		if secretFile == "" {
			return usageErr("--secret-file is required: a file whose first line is whsec_ and base64")
		}
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return refused("bad_secret_file: cannot read --secret-file: %v", err)
		}
		secret, _, _ = strings.Cut(string(b), "\n")
		secret = strings.TrimSpace(secret)
		if _, err := notify.ParseSecret(secret); err != nil {
			return refused("bad_secret_file: %s: the first line must be whsec_ followed by base64 of at least 24 bytes (see assent webhook add --help)", secretFile)
		}
		return nil
	}, func(ctx context.Context, db store.Store, _ []string) error {
		w := store.Webhook{ID: auth.NewID("wh_"), URL: u.String(), Secret: secret, CreatedAt: time.Now().UTC()}
		if err := db.Notify().AddWebhook(ctx, w); err != nil {
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Added webhook %s to %s.\nDecisions pending from now on are posted to it; a running server sees it within a second.\n", w.ID, w.URL)
		return nil
	})
	f := cmd.Flags()
	f.StringVar(&rawURL, "url", "", "where to post (required)")
	f.StringVar(&secretFile, "secret-file", "", "file whose first line is the signing secret, whsec_… (required)")
	return cmd
}

func newWebhookListCmd(c *cli) *cobra.Command {
	var asJSON bool
	cmd := storeCommand(&cobra.Command{
		Use:     "list",
		Short:   "List the webhooks (never their secrets)",
		Example: "  assent webhook list\n  assent webhook list --json",
		Args:    usageArgs(cobra.NoArgs),
	}, false, nil, func(ctx context.Context, db store.Store, _ []string) error {
		ws, err := db.Notify().Webhooks(ctx)
		if err != nil {
			return refused("%v", err)
		}
		if asJSON {
			if ws == nil {
				ws = []store.Webhook{}
			}
			return printJSON(c.out, ws)
		}
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tCREATED")
		for _, w := range ws {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", w.ID, w.URL, w.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newWebhookRemoveCmd(c *cli) *cobra.Command {
	return storeCommand(&cobra.Command{
		Use:     "remove WEBHOOK_ID",
		Short:   "Remove a webhook; its undelivered messages become dead letters",
		Example: "  assent webhook remove wh_0123456789abcdef0123",
		Args:    usageArgs(cobra.ExactArgs(1)),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		if err := db.Notify().RemoveWebhook(ctx, args[0]); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return refused("not_found: no webhook %q (assent webhook list shows them)", args[0])
			}
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Removed %s.\n", args[0])
		return nil
	})
}

func newWebhookDeadCmd(c *cli) *cobra.Command {
	var asJSON bool
	cmd := storeCommand(&cobra.Command{
		Use:     "dead",
		Short:   "List the notifications that failed every attempt (dead letters)",
		Example: "  assent webhook dead",
		Args:    usageArgs(cobra.NoArgs),
	}, false, nil, func(ctx context.Context, db store.Store, _ []string) error {
		ms, err := db.Notify().ListMessages(ctx, store.MessageDead, 0)
		if err != nil {
			return refused("%v", err)
		}
		if asJSON {
			type dead struct {
				ID, Channel, Item, LastError string
				Attempts                     int
			}
			out := []dead{}
			for _, m := range ms {
				out = append(out, dead{m.ID, m.Channel, m.Item, m.LastError, m.Attempts})
			}
			return printJSON(c.out, out)
		}
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTO\tITEM\tATTEMPTS\tLAST ERROR")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.ID, m.Channel, m.Item, m.Attempts, m.LastError)
		}
		return tw.Flush()
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newWebhookReplayCmd(c *cli) *cobra.Command {
	return storeCommand(&cobra.Command{
		Use:     "replay MESSAGE_ID",
		Short:   "Deliver a dead letter again, with a fresh set of attempts",
		Example: "  assent webhook replay msg_0123456789abcdef01234567",
		Args:    usageArgs(cobra.ExactArgs(1)),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		if err := db.Notify().ReplayMessage(ctx, args[0], time.Now()); err != nil {
			switch {
			case errors.Is(err, store.ErrNotFound):
				return refused("not_found: no message %q (assent webhook dead lists dead letters)", args[0])
			case errors.Is(err, store.ErrConflict):
				return refused("not_dead: message %q is not a dead letter; only those are replayed", args[0])
			}
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Replaying %s: a running server delivers it within a second.\n", args[0])
		return nil
	})
}
