package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/run/service"
	"github.com/assent-run/assent/store"
)

func newRunCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start, steer, inspect and retire Runs on a server",
		Long: `Runs are long-running work started from a Recipe or an inline command
template. Every command here talks to a running server (--url or ASSENT_URL;
the token in ASSENT_TOKEN or --token-file; inside a Run, ASSENT_RUN_TOKEN).`,
		Example: `  assent run spawn --recipe demo-player
  assent run control demo-player pause --input '{"reason":"operator"}'
  assent run inspect demo-player --view trace
  assent run control demo-player resume`,
	}
	cmd.AddCommand(newRunSpawnCmd(c), newRunInspectCmd(c), newRunControlCmd(c), newRunRetainCmd(c, "kill"),
		newRunRetainCmd(c, "archive"), newRunRetainCmd(c, "prune"), newRunLogsCmd(c), newRunDemoServiceCmd(c))
	return cmd
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// runIDArg accepts "id" or "run:id".
func runIDArg(s string) string { return strings.TrimPrefix(strings.TrimSpace(s), "run:") }

// callRuns sends a request to the Runs API and decodes the answer into
// typed, the run or store type the command reads. It returns the answer as
// the server sent it, for printResult.
func callRuns(ctx context.Context, o clientOpts, method, path string, body, typed any) (json.RawMessage, error) {
	cl, err := newAPIClient(o)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := cl.Do(ctx, method, path, body, &raw); err != nil {
		return nil, failAPI(err)
	}
	if err := json.Unmarshal(raw, typed); err != nil {
		return nil, refused("bad_response: the server's answer to %s %s does not decode (%v); use an assent of the server's version", method, path, err)
	}
	return raw, nil
}

// printResult prints an answer as one line of JSON with --json, otherwise
// for people: scalar fields as "key: value" lines, nested objects indented
// and lists of objects (Trace items, Runs, Controls) as tables. Both show
// every field the server sent, keys sorted.
func printResult(w io.Writer, asJSON bool, raw json.RawMessage) error {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return refused("bad_response: the server's answer is not a JSON object (%v)", err)
	}
	if asJSON {
		return printCompact(w, v)
	}
	return printHuman(w, v)
}

// spawnBody is the request of POST /v1/runs.
type spawnBody struct {
	RunID    string                     `json:"run_id"`
	Recipe   string                     `json:"recipe,omitempty"`
	Template json.RawMessage            `json:"template,omitempty"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
}

// controlBody is the request of POST /v1/runs/{id}/controls.
type controlBody struct {
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// settleBody is the request of a Run's service claiming or settling a
// Control.
type settleBody struct {
	InstanceID string  `json:"run_instance_id"`
	ID         *string `json:"id,omitempty"`
	Error      *string `json:"error,omitempty"`
}

// spawnAnswer is the answer to a spawn: a Run, or a proposal waiting for a
// person (status pending_approval).
type spawnAnswer struct {
	run.Run
	pending *run.PendingApproval
}

func (a *spawnAnswer) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &a.Run); err != nil {
		return err
	}
	if a.Status != run.StatusPendingApproval {
		return nil
	}
	a.pending = new(run.PendingApproval)
	return json.Unmarshal(b, a.pending)
}

func newRunSpawnCmd(c *cli) *cobra.Command {
	var o clientOpts
	var recipe, template, id, values string
	var sets []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "spawn",
		Short: "Start a Run from a Recipe or an inline template",
		Long: `Start a Run from a Recipe (a file under <data>/recipes that a person or the
operator wrote) or from an inline command template. A singleton Recipe, such
as the demo's demo-player, has one Run named after it: spawning it again
while it runs with the same values answers the running one. An agent's
inline template, unless its token grants command.execute, does not run: it
becomes a proposal that waits for a person in the web inbox (status
pending_approval).`,
		Example: `  assent run spawn --recipe demo-player
  assent run spawn --recipe deploy --set environment=staging --set version=1.4.2 --id deploy-staging
  assent run spawn --template 'echo hello {who}' --set who=world --id hello --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (recipe == "") == (template == "") {
				return usageErr("pass exactly one of --recipe or --template")
			}
			body := spawnBody{RunID: runIDArg(id), Recipe: recipe}
			if recipe == "" {
				var tpl json.RawMessage
				if t := strings.TrimSpace(template); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
					if !json.Valid([]byte(t)) {
						return usageErr("--template starting with [ or { must be JSON")
					}
					tpl = json.RawMessage(t)
				} else {
					tpl, _ = json.Marshal(template)
				}
				body.Template = tpl
			}
			vals := map[string]json.RawMessage{}
			if values != "" {
				if err := json.Unmarshal([]byte(values), &vals); err != nil {
					return usageErr("--values must be a JSON object: %v", err)
				}
			}
			for _, s := range sets {
				k, v, ok := strings.Cut(s, "=")
				if !ok || k == "" {
					return usageErr("--set takes name=value, got %q", s)
				}
				vals[k], _ = json.Marshal(v)
			}
			if len(vals) > 0 {
				body.Values = vals
			}
			var v spawnAnswer
			raw, err := callRuns(ctxOf(cmd), o, "POST", "/v1/runs", body, &v)
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				if err := printResult(c.out, true, raw); err != nil {
					return err
				}
			case v.pending != nil:
				fmt.Fprintf(c.out, "run=%s status=%s proposal=%s\n%s\n", v.pending.Run, v.pending.Status, v.pending.Proposal, v.pending.Message)
			default:
				fmt.Fprintf(c.out, "run=%s status=%s generation=%d pid=%d\n", v.ID, v.Status, v.Generation, v.PID)
			}
			if v.Status == run.StatusFailed {
				return refused("start_failed: Run %s failed at once: %s", v.ID, cmp.Or(strings.TrimSpace(v.StderrHead), "it wrote nothing to stderr; see assent run logs "+v.ID+" --stream stderr"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&recipe, "recipe", "", "Recipe file stem under <data>/recipes")
	f.StringVar(&template, "template", "", "inline command template: a shell command, or JSON list/object")
	f.StringVar(&id, "id", "", "Run id (default run-<epoch ms>)")
	f.StringVar(&values, "values", "", "argument values as a JSON object")
	f.StringArrayVar(&sets, "set", nil, "an argument value name=value (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	return cmd
}

func newRunInspectCmd(c *cli) *cobra.Command {
	var o clientOpts
	var view, source, status string
	var lines int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect TARGET",
		Short: "Show a view of a Run, the runtime or the recipes",
		Long: `TARGET is a Run id (or run:<id>), "runtime" or "recipes".
Views: a Run: status, recipe, trace, control; runtime: status, runs, triage;
recipes: summary. Only your own Runs are visible.`,
		Example: `  assent run inspect demo-player
  assent run inspect demo-player --view trace --lines 20
  assent run inspect demo-player --view control --json
  assent run inspect runtime --view triage`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0]
			switch target {
			case "runtime", "recipes":
				if view == "" {
					view = map[string]string{"runtime": "status", "recipes": "summary"}[target]
				}
			default:
				target = "run:" + runIDArg(target)
				if view == "" {
					view = "status"
				}
			}
			req := run.InspectRequest{Target: target, View: view, Lines: lines, Status: status, Source: source}
			raw, err := callRuns(ctxOf(cmd), o, "POST", "/v1/runs/inspect", req, inspectView(target, view))
			if err != nil {
				return err
			}
			return printResult(c.out, asJSON, raw)
		},
	}
	f := cmd.Flags()
	f.StringVar(&view, "view", "", "view to show")
	f.IntVar(&lines, "lines", 0, "items to show (trace, control)")
	f.StringVar(&source, "source", "", "trace source: all, lifecycle, control, process, runtime")
	f.StringVar(&status, "status", "", "runtime runs filter: all, active, terminal or a status")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	return cmd
}

func newRunControlCmd(c *cli) *cobra.Command {
	var o clientOpts
	var input string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "control RUN ACTION",
		Short: "Apply a Control action to a Run, or claim and settle Controls as its service",
		Long: `With RUN and ACTION, apply a declared Control action (or kill, archive,
prune) to a Run you own. The subcommands claim, handled and failed are for
the Run's own service, which uses its run-scoped token.`,
		Example: `  assent run control demo-player pause
  assent run control demo-player resume
  assent run control demo-player status --input '{"why":"checking"}'
  assent run control claim --id 6f1c…   # inside the Run
  assent run control handled 6f1c…      # inside the Run`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := controlBody{Action: args[1]}
			if input != "" {
				if !json.Valid([]byte(input)) {
					return usageErr("--input must be JSON (a string, object or array)")
				}
				body.Input = json.RawMessage(input)
			}
			raw, err := callRuns(ctxOf(cmd), o, "POST", "/v1/runs/"+url.PathEscape(runIDArg(args[0]))+"/controls", body, controlAnswer(body.Action))
			if err != nil {
				return err
			}
			return printResult(c.out, asJSON, raw)
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "Control input as JSON (at most 380 bytes)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	cmd.AddCommand(newRunSettleCmd(c, "claim"), newRunSettleCmd(c, "handled"), newRunSettleCmd(c, "failed"))
	return cmd
}

// newRunSettleCmd is "run control claim|handled|failed", used by a Run's
// service with ASSENT_RUN_ID and ASSENT_RUN_INSTANCE_ID from its
// environment.
func newRunSettleCmd(c *cli, verb string) *cobra.Command {
	var o clientOpts
	var runID, instance, id, msg string
	var asJSON bool
	use, short, example := verb+" CONTROL_ID", "Mark a claimed Control "+verb, "  assent run control "+verb+" 6f1c2d3e-…"
	args := usageArgs(cobra.ExactArgs(1))
	switch verb {
	case "claim":
		use, short, args = "claim", "Claim a Control (by --id, or the oldest claimable)", usageArgs(cobra.NoArgs)
		example = "  assent run control claim --id 6f1c2d3e-…\n  assent run control claim --json"
	case "failed":
		example = "  assent run control failed 6f1c2d3e-… --error 'device busy'"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runID == "" {
				return usageErr("no Run: pass --run or set ASSENT_RUN_ID")
			}
			body := settleBody{InstanceID: instance}
			path := "/v1/runs/" + url.PathEscape(runIDArg(runID)) + "/controls/"
			switch verb {
			case "claim":
				body.ID = &id
				path += "claim"
			case "failed":
				body.Error = &msg
				path += url.PathEscape(args[0]) + "/failed"
			default:
				path += url.PathEscape(args[0]) + "/handled"
			}
			var v store.Control
			raw, err := callRuns(ctxOf(cmd), o, "POST", path, body, &v)
			if err != nil {
				return err
			}
			if asJSON {
				return printResult(c.out, true, raw)
			}
			fmt.Fprintf(c.out, "control=%s action=%s status=%s\n", v.ID, v.Action, v.Status)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runID, "run", os.Getenv("ASSENT_RUN_ID"), "Run id (default $ASSENT_RUN_ID)")
	f.StringVar(&instance, "instance", os.Getenv("ASSENT_RUN_INSTANCE_ID"), "Run generation (default $ASSENT_RUN_INSTANCE_ID)")
	if verb == "claim" {
		f.StringVar(&id, "id", "", "Control id to claim (default the oldest claimable)")
	}
	if verb == "failed" {
		f.StringVar(&msg, "error", "", "why it failed (kept up to 4 KiB)")
	}
	f.BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	return cmd
}

func newRunRetainCmd(c *cli, action string) *cobra.Command {
	var o clientOpts
	var preserve, asJSON bool
	short := map[string]string{
		"kill":    "Kill a running Run's whole process group (SIGKILL)",
		"archive": "Move a terminal Run's files aside, leaving a tombstone",
		"prune":   "Delete a terminal Run (optionally keeping its declared artifacts)",
	}[action]
	example := map[string]string{
		"kill":    "  assent run kill demo-player",
		"archive": "  assent run archive deploy-staging",
		"prune":   "  assent run prune deploy-staging --preserve-artifacts",
	}[action]
	cmd := &cobra.Command{
		Use: action + " RUN", Short: short, Example: example, Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body any
			if action == "prune" {
				body = struct {
					Preserve bool `json:"preserve_artifacts"`
				}{preserve}
			}
			answer := controlAnswer(action)
			raw, err := callRuns(ctxOf(cmd), o, "POST", "/v1/runs/"+url.PathEscape(runIDArg(args[0]))+"/"+action, body, answer)
			if err != nil {
				return err
			}
			if err := printResult(c.out, asJSON, raw); err != nil {
				return err
			}
			if k, ok := answer.(*run.KillResult); ok && !k.Killed {
				return silentExit(exitRefused)
			}
			return nil
		},
	}
	if action == "prune" {
		cmd.Flags().BoolVar(&preserve, "preserve-artifacts", false, "copy existing declared artifacts aside before deleting")
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	return cmd
}

func newRunLogsCmd(c *cli) *cobra.Command {
	var o clientOpts
	var stream string
	var lines int
	cmd := &cobra.Command{
		Use:     "logs RUN",
		Short:   "Print a Run's stdout or stderr",
		Example: "  assent run logs demo-player\n  assent run logs demo-player --stream stderr --lines 20",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := newAPIClient(o)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			q := url.Values{"stream": {stream}, "lines": {strconv.Itoa(lines)}}
			if err := cl.Do(ctxOf(cmd), "GET", "/v1/runs/"+url.PathEscape(runIDArg(args[0]))+"/logs?"+q.Encode(), nil, &raw); err != nil {
				return failAPI(err)
			}
			_, err = c.out.Write(raw)
			return err
		},
	}
	cmd.Flags().StringVar(&stream, "stream", "stdout", "stdout or stderr")
	cmd.Flags().IntVar(&lines, "lines", 0, "last lines only (default all, up to 1 MiB)")
	addClientFlags(cmd, &o)
	return cmd
}

// inspectView returns the view type that inspect answers for target and
// view, to decode the answer into.
func inspectView(target, view string) run.View {
	switch target {
	case "runtime":
		switch view {
		case "runs":
			return new(run.RunList)
		case "triage":
			return new(run.Triage)
		}
		return new(run.RuntimeStatus)
	case "recipes":
		return new(run.RecipesSummary)
	}
	switch view {
	case "recipe":
		return new(run.RecipeView)
	case "trace":
		return new(run.TraceView)
	case "control":
		return new(run.ControlView)
	}
	return new(run.Run)
}

// controlAnswer returns the result type of a Control action, to decode
// the answer into: the runtime's kill, archive and prune answer with their
// results; a declared action with its delivery.
func controlAnswer(action string) any {
	switch action {
	case "kill":
		return new(run.KillResult)
	case "archive":
		return new(run.ArchiveResult)
	case "prune":
		return new(run.PruneResult)
	}
	return new(run.ControlDelivery)
}

// newRunDemoServiceCmd is the service of the demo Recipe: it ticks, and
// accepts pause, resume and status Controls.
func newRunDemoServiceCmd(c *cli) *cobra.Command {
	var interval float64
	var ticks int
	cmd := &cobra.Command{
		Use:     "demo-service",
		Short:   "The demo player service (started by the demo-player Recipe)",
		Hidden:  true,
		Example: "  assent run spawn --recipe demo-player",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := service.FromEnv()
			if err != nil {
				return refused("%v", err)
			}
			ctx, stop := signal.NotifyContext(ctxOf(cmd), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runDemo(ctx, svc, time.Duration(interval*float64(time.Second)), ticks, c.err)
		},
	}
	cmd.Flags().Float64Var(&interval, "interval", 2, "seconds between ticks")
	cmd.Flags().IntVar(&ticks, "ticks", 0, "stop after this many ticks (0: run until killed)")
	return cmd
}

// runDemo is the demo player: one tick per interval while playing; pause,
// resume and status Controls; a Trace event for each.
func runDemo(ctx context.Context, svc *service.Service, interval time.Duration, ticks int, logw io.Writer) error {
	if interval <= 0 {
		interval = time.Second
	}
	type state struct {
		Playing bool `json:"playing"`
		Tick    int  `json:"tick"`
	}
	controls := make(chan service.Control)
	results := make(chan error)
	errc := make(chan error, 1)
	go func() {
		errc <- svc.Serve(ctx, func(ctx context.Context, c service.Control) error {
			select {
			case controls <- c:
				return <-results
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	st := state{Playing: true}
	emit := func(kind, summary, level, attention string) {
		data, _ := json.Marshal(st)
		if err := svc.Emit(ctx, service.Event{Kind: kind, Summary: summary, Data: data, Level: level, Attention: attention}); err != nil {
			fmt.Fprintf(logw, "demo: emit %s: %v\n", kind, err)
		}
	}
	emit("player.started", "Player started", "", "notify")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-errc
			return nil
		case err := <-errc:
			return err
		case <-t.C:
			if !st.Playing {
				continue
			}
			st.Tick++
			emit("player.tick", "tick "+strconv.Itoa(st.Tick), "", "")
			if ticks > 0 && st.Tick >= ticks {
				emit("player.finished", "Played "+strconv.Itoa(ticks)+" ticks", "", "followup")
				return nil
			}
		case c := <-controls:
			var err error
			switch c.Action {
			case "pause":
				st.Playing = false
				emit("player.paused", "Paused at tick "+strconv.Itoa(st.Tick), "", "")
			case "resume":
				st.Playing = true
				emit("player.resumed", "Resumed at tick "+strconv.Itoa(st.Tick), "", "")
			case "status":
				emit("player.status", fmt.Sprintf("playing=%v tick=%d", st.Playing, st.Tick), "", "notify")
			default:
				err = fmt.Errorf("the demo player does not know %q", c.Action)
			}
			results <- err
		}
	}
}
