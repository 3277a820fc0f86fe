package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// dataDir resolves --data, then $ASSENT_DATA, then ./assent-data.
func dataDir(flag string) string {
	return firstNonEmpty(flag, os.Getenv("ASSENT_DATA"), "assent-data")
}

// openStore opens the data directory's store, creating the directory when
// create is set.
func openStore(ctx context.Context, dir string, create bool) (*sqlite.DB, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, refused("cannot create data directory %s: %v", dir, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, "assent.db")); err != nil {
		return nil, refused("no assent data in %s: start assent serve --data %s once, or pass the right --data", dir, dir)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		return nil, refused("%v", err)
	}
	return db, nil
}

func newServeCmd(c *cli) *cobra.Command {
	var (
		data, addr, baseURL, logFormat string
		demo                           bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the assent server (HTTP API, MCP endpoint and web UI)",
		Long: `Run the assent server on the embedded SQLite store.

The first start creates the data directory and the store, a person ("owner")
and an agent, and prints the agent's token. Every start prints a new one-time
sign-in link for the owner (valid 15 minutes) and a ready-to-paste MCP client
configuration. SIGINT or SIGTERM shuts down gracefully.`,
		Example: `  assent serve --demo
  assent serve --data /var/lib/assent --addr 127.0.0.1:7410
  ASSENT_DATA=./data assent serve`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir := dataDir(data)
			log := newLogger(c.err, logFormat)
			db, err := openStore(ctx, dir, true)
			if err != nil {
				return err
			}
			defer db.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return refused("cannot listen on %s: %v", addr, err)
			}
			base := baseURL
			if base == "" {
				base = "http://" + ln.Addr().String()
			}
			boot, err := server.EnsureBootstrap(ctx, db, time.Now())
			if err != nil {
				ln.Close()
				return refused("%v", err)
			}
			srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db, Logger: log, Demo: demo, BaseURL: base})
			if err != nil {
				ln.Close()
				return refused("%v", err)
			}
			defer srv.Close()
			link, err := server.NewSignInLink(ctx, db, boot.Owner.ID, base, time.Now())
			if err != nil {
				ln.Close()
				return refused("%v", err)
			}
			printWelcome(c.out, base, dir, db.Kind(), link, boot)
			log.Info("serving", "addr", ln.Addr().String(), "data", dir, "demo", demo)
			if err := srv.Serve(ctx, ln); err != nil {
				return refused("%v", err)
			}
			log.Info("stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "data directory (default $ASSENT_DATA or ./assent-data)")
	f.StringVar(&addr, "addr", "127.0.0.1:7410", "address to listen on (HOST:PORT; port 0 picks a free one)")
	f.StringVar(&baseURL, "base-url", "", "public URL of this server, when behind a proxy (default http://ADDR)")
	f.BoolVar(&demo, "demo", false, "load the demo workspace")
	f.StringVar(&logFormat, "log", "text", "log format on stderr: text or json")
	return cmd
}

func newLogger(w io.Writer, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func printWelcome(w io.Writer, base, dir, storeKind, link string, boot server.Bootstrap) {
	fmt.Fprintf(w, "assent %s serving on %s (data: %s, store: %s)\n\n", assent.Version, base, dir, storeKind)
	fmt.Fprintf(w, "Sign in as %s (one use, within 15 minutes):\n  %s\n\n", boot.Owner.Name, link)
	token := boot.AgentToken
	if token != "" {
		fmt.Fprintf(w, "Agent token for %q (shown once; keep it secret):\n  %s\n\n", boot.Agent.Name, token)
	} else {
		fmt.Fprintf(w, "Agent %q keeps the token printed at first start (make another: assent token create --kind agent --name NAME --data %s).\n\n", boot.Agent.Name, dir)
		token = "<agent token>"
	}
	cfg := map[string]any{"mcpServers": map[string]any{
		"assent": map[string]any{
			"type": "http", "url": base + "/mcp",
			"headers": map[string]string{"Authorization": "Bearer " + token},
		},
		"assent-stdio": map[string]any{
			"command": "assent", "args": []string{"mcp", "--url", base},
			"env": map[string]string{"ASSENT_TOKEN": token},
		},
	}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	fmt.Fprintf(w, "MCP client configuration (streamable HTTP and stdio):\n%s\n\n", b)
}
