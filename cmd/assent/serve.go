package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/postgres"
	"github.com/assent-run/assent/store/sqlite"
)

// dataDir resolves --data, then $ASSENT_DATA, then ./assent-data.
func dataDir(flag string) string {
	return firstNonEmpty(flag, os.Getenv("ASSENT_DATA"), "assent-data")
}

// absDataDir is dataDir made absolute, so that every path derived from it
// (the store, Run directories, printed configuration) stays right whatever
// the working directory of whoever uses it.
func absDataDir(flag string) (string, error) {
	dir, err := filepath.Abs(dataDir(flag))
	if err != nil {
		return "", refused("bad_data_dir: cannot resolve the data directory %q: %v", dataDir(flag), err)
	}
	return dir, nil
}

// openStore opens the data directory's store, creating the directory when
// create is set.
func openStore(ctx context.Context, dir string, create bool) (*sqlite.DB, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, refused("data_dir: cannot create data directory %s: %v", dir, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, "assent.db")); err != nil {
		return nil, refused("no_data: no assent data in %s: start assent serve --data %s once, or pass the right --data", dir, dir)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		return nil, refused("%v", err)
	}
	return db, nil
}

// openServeStore opens the server's store: PostgreSQL when rawURL is set,
// otherwise SQLite in dir. dir is created either way: Runs keep their
// files there. Errors carry a stable code and never show the password.
func openServeStore(ctx context.Context, dir, rawURL string) (store.Store, error) {
	if rawURL == "" {
		return openStore(ctx, dir, true)
	}
	if !postgres.IsURL(rawURL) {
		return nil, badStoreURL(rawURL)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, refused("data_dir: cannot create data directory %s: %v", dir, err)
	}
	return openPostgres(ctx, rawURL)
}

func newServeCmd(c *cli) *cobra.Command {
	var (
		data, addr, baseURL, logFormat, runUser, node string
		storeOpts                                     storeFlags
		runUIDs, runNetwork                           string
		withDemo, oauthInsecure                       bool
		leaseTTL                                      time.Duration
		mailOpts                                      mailFlags
		decisionDeadline, remindBefore                string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the assent server (HTTP API, MCP endpoint and web UI)",
		Long: `Run the assent server.

State is kept in SQLite in the data directory (assent.db) by default. With
ASSENT_STORE=postgres://USER:PASSWORD@HOST:PORT/DATABASE (or --store-file FILE
holding that URL, or --store with a URL that has no password, the password
then in a PGPASSFILE) it is kept in PostgreSQL instead: the schema is created or
brought up to date at start. The data directory is still used for Run
files.

The first start creates the data directory and the store, a person ("owner")
and an agent, and prints the agent's token and a one-time sign-in link for
the owner (valid 15 minutes); later starts print the command that makes a
new link (assent token link owner). Every start prints a ready-to-paste MCP client
configuration whose stdio command exists on this machine (the binary's
absolute path, or "go -C REPO run ./cmd/assent" when started by go run).
The data directory is made absolute at start.

Run and tool processes start with no_new_privs (a setuid program cannot
raise them) in new PID, mount and IPC namespaces (and a user namespace
when serving as a non-root user): each sees only its own processes in
/proc, only its own Run directory of the data directory, and private
/tmp, /dev/shm, /run/lock and IPC objects.

With --run-network isolated (the default) each also gets a network
namespace of its own in which only loopback is up: no port of the machine
(this server's listener, PostgreSQL, other services) and no other host is
reachable from it. A Run reaches this server only at its ASSENT_URL,
http://127.0.0.1:7410 inside its namespace, which its init passes on to the
socket run-api/server.sock in the data directory, with its run-scoped
token. --run-network host lets Runs share the server's network, for
Recipes that need it; ASSENT_URL is then the server's base URL.

Where the kernel refuses the namespaces, serve logs a warning at start and
Runs see every process on the machine, command lines included, and share
its network; where only the network namespace is refused, Runs share the
network and serve says so. Serving as a non-root user, the namespaces are
made in a user namespace of the Run's own, where the kernel allows
unprivileged user namespaces (kernel.unprivileged_userns_clone,
user.max_user_namespaces, an AppArmor or SELinux policy may refuse them);
Runs then keep the server's user, and serve warns that they can read what
that user can (see docs/security.md).

Several nodes may share one PostgreSQL store (see docs/deploy.md). Each
needs a name of its own, the same across its restarts: --node (or
ASSENT_NODE; default the host name and a digest of the data directory). A
node holds a lease on each Run it supervises, renewed every third of
--lease-ttl; when a node stops renewing, another one finds its Runs lost.

Pending decisions are announced by mail when --smtp and --mail-from are
given (the password from ASSENT_SMTP_PASSWORD or --smtp-password-file,
never the URL) and to the webhooks "assent webhook add" registers; see
docs/notifications.md. --decision-deadline gives each kind of decision a
default deadline (command=1h,proposal=24h): past it, nobody deciding
declines a command proposal and discards a staged value, with the reason
"no decision before the deadline"; --remind-before 1h,10m reminds the
people a decision is routed to at those points before its deadline.

With --demo it loads the demo workspace (a profile form, screens, a player
Recipe, expense and deployment Flows), puts a proposed profile change, the
payment screen and an expense approval in the owner's inbox, and prints the
command that runs the scripted "assent demo agent". SIGINT or SIGTERM shuts
down gracefully.`,
		Example: `  assent serve --demo
  assent serve --data /var/lib/assent --addr 127.0.0.1:7410
  ASSENT_DATA=./data assent serve
  ASSENT_STORE=postgres://assent:secret@127.0.0.1:5432/assent assent serve
  assent serve --store-file /etc/assent/store-url`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch runNetwork {
			case run.NetworkIsolated, run.NetworkHost:
			default:
				return refused("bad_run_network: --run-network must be %s (each Run in a network of its own, reaching only this server) or %s (Runs share the server's network), not %q", run.NetworkIsolated, run.NetworkHost, runNetwork)
			}
			if runUIDs != "" {
				if runUser != "" {
					return refused("bad_run_user: --run-uids and --run-user exclude each other: pass --run-uids to give each Run its own uid, or --run-user to run them all as one user")
				}
				if _, _, err := run.ParseRunUIDs(runUIDs); err != nil {
					return refused("bad_run_uids: --run-uids: %v", err)
				}
				runUser = runUIDs
			}
			smtpCfg, err := mailOpts.resolve()
			if err != nil {
				return err
			}
			deadlines, err := parseDecisionDeadlines(decisionDeadline)
			if err != nil {
				return err
			}
			reminders, err := parseRemindBefore(remindBefore)
			if err != nil {
				return err
			}
			dir, err := absDataDir(data)
			if err != nil {
				return err
			}
			log := newLogger(c.err, logFormat)
			storeURL, err := storeOpts.resolve()
			if err != nil {
				return err
			}
			db, err := openServeStore(ctx, dir, storeURL)
			if err != nil {
				return err
			}
			defer db.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return refused("cannot_listen: cannot listen on %s: %v; another process may hold the port: stop it, or pass --addr 127.0.0.1:PORT with a free port", addr, err)
			}
			base := baseURL
			if base == "" {
				base = "http://" + ln.Addr().String()
			}
			boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
			if err != nil {
				ln.Close()
				return refused("%v", err)
			}
			// Commands that print links on this store (token create,
			// token link) point them here unless told otherwise.
			if err := db.Settings().SetSetting(ctx, settingServedURL, base); err != nil {
				log.Warn("the server's address was not recorded; sign-in links printed by assent token default to "+defaultURL, "err", err)
			}
			if leaseTTL == 0 && os.Getenv("ASSENT_LEASE_TTL") != "" {
				if leaseTTL, err = time.ParseDuration(os.Getenv("ASSENT_LEASE_TTL")); err != nil {
					ln.Close()
					return refused("bad_lease_ttl: ASSENT_LEASE_TTL must be a duration such as 15s, not %q", os.Getenv("ASSENT_LEASE_TTL"))
				}
			}
			if leaseTTL < 0 || leaseTTL > store.LeaseMaxTTL {
				ln.Close()
				return refused("bad_lease_ttl: --lease-ttl must be between 0 (the default, %s) and %s, not %s", run.DefaultLeaseTTL, store.LeaseMaxTTL, leaseTTL)
			}
			cfg := server.Config{DataDir: dir, Store: db, Logger: log, BaseURL: base, RunUser: runUser,
				Node: firstNonEmpty(node, os.Getenv("ASSENT_NODE")), LeaseTTL: leaseTTL, OAuthInsecureClientIDs: oauthInsecure,
				Notify: notify.Options{SMTP: smtpCfg}, RunNetwork: runNetwork, DecisionDeadlines: deadlines, RemindBefore: reminders}
			srv, err := server.New(ctx, cfg)
			if err != nil {
				ln.Close()
				return refused("%v", err)
			}
			defer srv.Close()
			var seed *demo.Seeded
			if withDemo {
				app, err := demo.Install(ctx, srv, cfg)
				if err != nil {
					ln.Close()
					return refused("%v", err)
				}
				sd, err := app.Seed(ctx)
				if err != nil {
					log.Warn("the demo inbox was not seeded", "err", err)
				} else {
					seed = &sd
				}
			}
			// A live sign-in link is printed only when the owner was just
			// made: output kept in a file or a journal would otherwise hold
			// a fresh owner session on every start.
			var link string
			if boot.First {
				if link, err = auth.NewSignInLink(ctx, db.Sessions(), boot.Owner.ID, base, time.Now()); err != nil {
					ln.Close()
					return refused("%v", err)
				}
			}
			printWelcome(c.out, welcome{base: base, dir: dir, storeKind: db.Kind(), link: link, boot: boot, demo: withDemo, seed: seed, self: currentInvocation()})
			log.Info("serving", "addr", ln.Addr().String(), "data", dir, "store", db.Kind(), "node", srv.Node(), "demo", withDemo)
			if err := srv.Serve(ctx, ln); err != nil {
				return refused("%v", err)
			}
			log.Info("stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "data directory (default $ASSENT_DATA or ./assent-data)")
	storeOpts.add(f, "PostgreSQL URL to keep state in, without a password: postgres://USER@HOST:PORT/DATABASE (default $ASSENT_STORE, else SQLite in the data directory); the password goes in ASSENT_STORE, a PGPASSFILE or --store-file")
	f.StringVar(&addr, "addr", "127.0.0.1:7410", "address to listen on (HOST:PORT; port 0 picks a free one)")
	f.StringVar(&baseURL, "base-url", "", "public URL of this server, when behind a proxy (default http://ADDR)")
	f.BoolVar(&withDemo, "demo", false, "load the demo workspace and put a proposal, a screen and an approval in the owner's inbox")
	f.StringVar(&logFormat, "log", "text", "log format on stderr: text or json")
	f.StringVar(&node, "node", "", "name of this node among the nodes sharing the store; unique, and the same across restarts (default $ASSENT_NODE, else the host name and a digest of the data directory)")
	f.DurationVar(&leaseTTL, "lease-ttl", 0, "time to live of this node's Run leases: a Run whose node dies is found lost within about this time and a third (default $ASSENT_LEASE_TTL, else 15s)")
	f.StringVar(&runUIDs, "run-uids", "", "when serving as root, the uids Run and tool processes run as, each its own: FIRST-LAST (default "+run.DefaultRunUIDs+")")
	f.BoolVar(&oauthInsecure, "oauth-insecure-client-ids", false, "development only: let OAuth client ID metadata documents be fetched over http and from loopback and private addresses")
	f.StringVar(&runNetwork, "run-network", run.NetworkIsolated, "network of Run and tool processes: isolated (each its own, with loopback only; a Run reaches this server alone, at its ASSENT_URL) or host (they share the server's network)")
	mailOpts.add(f)
	f.StringVar(&decisionDeadline, "decision-deadline", "", "how long each kind of decision waits for a person when its request names no deadline, as KIND=DURATION pairs: command=1h (command and tool proposals; declined past it), proposal=24h (values staged on controls; discarded past it), question=4h (agents' questions naming no deadline; declined past it), program=24h (Flow programs agents propose; declined past it); durations 1s to 30d, such as 90m or 3d (default: no deadline)")
	f.StringVar(&remindBefore, "remind-before", "", "points before a decision's deadline at which the people it is routed to are reminded, once each, by mail and webhook (decision.reminder), such as 1h,10m (default: no reminders)")
	f.StringVar(&runUser, "run-user", "", "when serving as root, run every Run and tool process as this one user instead (a name or UID:GID); Runs can then reach each other")
	return cmd
}

func newLogger(w io.Writer, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// welcome is what serve prints once it listens.
type welcome struct {
	base, dir, storeKind, link string
	boot                       auth.Bootstrap
	demo                       bool
	// seed is what the demo put in the inbox, when it did.
	seed *demo.Seeded
	// self is how to start this assent again.
	self invocation
}

// tokenPlaceholder stands for an agent token the server no longer knows.
const tokenPlaceholder = "asnt_…"

func printWelcome(w io.Writer, wl welcome) {
	fmt.Fprintf(w, "assent %s serving on %s (data: %s, store: %s)\n\n", assent.Version, wl.base, wl.dir, wl.storeKind)
	if wl.link != "" {
		fmt.Fprintf(w, "Sign in as %s (one use, within 15 minutes):\n  %s\n\n", wl.boot.Owner.Name, wl.link)
	} else {
		fmt.Fprintf(w, "Make a one-time sign-in link for %s with:\n  %s\n\n", wl.boot.Owner.Name, wl.self.shell("token", "link", wl.boot.Owner.Name, "--data", wl.dir))
	}
	token := wl.boot.AgentToken
	makeToken := wl.self.shell("token", "create", "--kind", "agent", "--name", "NAME", "--grant", "state.write,tool.invoke", "--data", wl.dir)
	if token != "" {
		fmt.Fprintf(w, "Agent token for %q (shown once; keep it secret):\n  %s\n\n", wl.boot.Agent.Name, token)
	} else {
		fmt.Fprintf(w, "Agent %q keeps the token printed at first start; this start cannot show it again.\nMake another agent token with:\n  %s\n\n", wl.boot.Agent.Name, makeToken)
	}
	if wl.demo {
		if line := seedLine(wl.seed); line != "" {
			fmt.Fprintln(w, line)
		}
		if wl.seed != nil && wl.seed.SecondPerson != "" {
			fmt.Fprintf(w, "Expense %s is over the two-person limit: it needs your approval and %s's. A one-time sign-in link for %s:\n  %s\n",
				demo.LargeExpenseID, wl.seed.SecondPerson, wl.seed.SecondPerson, wl.self.shell("token", "link", wl.seed.SecondPerson, "--data", wl.dir))
		}
		fmt.Fprintln(w, "Watch an agent walk through every part (propose, show a screen, start and steer a Run, ask for an approval):")
		// The token goes in the environment: on a command line every
		// process on the machine could read it.
		cmdline := wl.self.shell("demo", "agent", "--url", wl.base)
		if token != "" {
			fmt.Fprintf(w, "  ASSENT_TOKEN=%s %s\n\n", shellWord(token), cmdline)
		} else {
			fmt.Fprintf(w, "  ASSENT_TOKEN=%s %s   (with an agent token in place of %s)\n\n", tokenPlaceholder, cmdline, tokenPlaceholder)
		}
	}
	shown := token
	if shown == "" {
		shown = tokenPlaceholder
	}
	name, args := wl.self.command("mcp", "--url", wl.base)
	cfg := map[string]any{"mcpServers": map[string]any{
		"assent": map[string]any{
			"type": "http", "url": wl.base + "/mcp",
			"headers": map[string]string{"Authorization": "Bearer " + shown},
		},
		"assent-stdio": map[string]any{
			"command": name, "args": args,
			"env": map[string]string{"ASSENT_TOKEN": shown},
		},
	}}
	fmt.Fprintln(w, "MCP client configuration (streamable HTTP and stdio):")
	printJSON(w, cfg)
	if token == "" {
		fmt.Fprintf(w, "Replace %s with an agent token (see above).\n", tokenPlaceholder)
	}
	fmt.Fprintln(w)
}

// seedLine says in one sentence what the demo put in the owner's inbox.
func seedLine(seed *demo.Seeded) string {
	if seed == nil {
		return ""
	}
	var items []string
	if seed.Proposal != "" {
		items = append(items, "a proposed profile change")
	}
	if seed.ApprovalStatus == "pending" {
		items = append(items, "an expense waiting for your approval")
	}
	line := ""
	if len(items) > 0 {
		line = "Your inbox has " + strings.Join(items, " and ") + "."
	}
	if seed.Screen != "" {
		line = strings.TrimSpace(line + " The payment screen is open under Screens.")
	}
	return line
}
