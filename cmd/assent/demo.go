package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/demo"
)

// Names the demo agent works with: the demo workspace's form, Recipe and
// Flow instance.
const (
	demoPlayerRun   = "demo-player"
	demoExpense     = demo.ExpenseID
	demoPollEvery   = time.Second
	demoSettleLimit = 20 * time.Second
)

func newDemoCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch the demo workspace work",
		Long: `Commands that show the demo workspace of "assent serve --demo" at work.

"assent demo agent" is a scripted agent: it connects over MCP like any
client and walks through every part while you watch in the browser.`,
		Example: `  ASSENT_TOKEN=asnt_… assent demo agent --url http://127.0.0.1:7410`,
	}
	cmd.AddCommand(newDemoAgentCmd(c))
	return cmd
}

func newDemoAgentCmd(c *cli) *cobra.Command {
	var (
		o      clientOpts
		data   string
		wait   time.Duration
		noWait bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a scripted agent through every part of the demo, one narrated step at a time",
		Long: `Connect to a server started with "assent serve --demo" over MCP, as any
agent does, and walk through every part, printing one line per step and
where to look in the browser:

  1. propose a profile change (controls_execute stage): it waits in your inbox
  2. show the payment screen (show_screen)
  3. start the demo player Run (actors_run_spawn, Recipe demo-player)
  4. pause it and 5. resume it (actors_control_apply)
  6. ask the expense Flow for its next step (flows_prescribe): a person must approve
  7. wait for your decision (flows_inspect), up to --wait, and print it

It connects to --url (or ASSENT_URL) with the token in ASSENT_TOKEN (or
the first line of --token-file; --token on the command line is refused), or,
with --data, runs in process on a data directory as "assent mcp --data"
does, and prints a sign-in link to that process's own web UI.

A step that fails prints the step, the tool's error code and message, and
exits 1. Ctrl-C while waiting for your decision stops waiting (exit 0);
earlier, it stops the tour (exit 1).`,
		Example: `  ASSENT_TOKEN=asnt_… assent demo agent --url http://127.0.0.1:7410
  assent demo agent --no-wait
  assent demo agent --wait 5m`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			if wait < 0 {
				return usageErr("--wait must be 0 or more, such as 2m")
			}
			if noWait {
				wait = 0
			}
			base, err := serverURL(firstNonEmpty(o.url, os.Getenv("ASSENT_URL"), defaultURL))
			if err != nil {
				return err
			}
			var cs *mcp.ClientSession
			if data != "" {
				tok, err := readToken(o.token, o.tokenFile, "ASSENT_TOKEN")
				if err != nil {
					return err
				}
				rt, err := startInProcess(ctx, c, data, storeFlags{}, tok, true)
				if err != nil {
					return err
				}
				defer rt.close()
				base = rt.base
				if link, err := rt.signInLink(ctx); err == nil {
					fmt.Fprintf(c.out, "Running in process on %s until the tour ends; to watch, sign in (one use): %s\n", base, link)
				}
				st, ct := mcp.NewInMemoryTransports()
				ss, err := rt.mcp.Connect(ctx, st, nil)
				if err != nil {
					return refused("%v", err)
				}
				defer ss.Close()
				if cs, err = demoClient().Connect(ctx, ct, nil); err != nil {
					return refused("%v", err)
				}
			} else {
				api, err := newAPIClient(o)
				if err != nil {
					return err
				}
				if cs, err = connectMCP(ctx, api); err != nil {
					return err
				}
			}
			defer cs.Close()
			d := &demoAgent{cs: cs, out: c.out, base: base, wait: wait, inProcess: data != ""}
			return d.tour(ctx)
		},
	}
	addClientFlags(cmd, &o)
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "run in process on this data directory instead of connecting to a server")
	f.DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for your decision on the expense (0: do not wait)")
	f.BoolVar(&noWait, "no-wait", false, "do not wait for your decision (same as --wait 0)")
	return cmd
}

func demoClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "assent-demo-agent", Version: assent.Version}, nil)
}

// connectMCP opens an MCP session to the server api points at, with its
// bearer token.
func connectMCP(ctx context.Context, api *client.Client) (*mcp.ClientSession, error) {
	cs, err := demoClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   api.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: api.Token(), base: http.DefaultTransport}},
	}, nil)
	if err != nil {
		if strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			return nil, refused("sign_in_required: the server refused the token (unknown or revoked); use the agent token assent serve printed, or make one with assent token create --kind agent --name NAME")
		}
		return nil, refused("unreachable: cannot reach assent at %s: %v (is assent serve --demo running?)", api.BaseURL(), err)
	}
	return cs, nil
}

// demoAgent walks through the demo over one MCP session.
type demoAgent struct {
	cs        *mcp.ClientSession
	out       io.Writer
	base      string
	wait      time.Duration
	inProcess bool
	// started is set once the tour has the player running.
	started bool
	step    int
}

// stepError is a failed step: the tool's error code and message.
type stepError struct {
	step         int
	what         string
	code, detail string
}

func (e *stepError) Error() string {
	return fmt.Sprintf("step %d (%s): %s: %s", e.step, e.what, e.code, e.detail)
}

// say prints one narrated step and where to look.
func (d *demoAgent) say(line, look string) {
	d.step++
	fmt.Fprintf(d.out, "%d. %s\n", d.step, line)
	if look != "" {
		fmt.Fprintf(d.out, "   look: %s%s\n", d.base, look)
	}
}

// call calls a tool and returns its structured result, or a step error
// with the tool's code and message.
func (d *demoAgent) call(ctx context.Context, what, name string, args map[string]any) (map[string]any, error) {
	res, err := d.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &stepError{step: d.step + 1, what: what, code: "mcp_error", detail: err.Error()}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	if !res.IsError {
		return out, nil
	}
	code, msg := toolError(out, res)
	return out, &stepError{step: d.step + 1, what: what, code: code, detail: msg}
}

// toolError reads the code and message of a tool's error result: an
// {"error": {code, message}} body, or a control result's reason and
// message.
func toolError(out map[string]any, res *mcp.CallToolResult) (string, string) {
	if e, ok := out["error"].(map[string]any); ok {
		code, _ := e["code"].(string)
		msg, _ := e["message"].(string)
		return firstNonEmpty(code, "tool_error"), msg
	}
	if r, ok := out["reason"].(string); ok && r != "" {
		msg, _ := out["message"].(string)
		return r, msg
	}
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	return "tool_error", strings.Join(text, " ")
}

// retrying calls a tool again while it answers endpoint_not_ready (a Run
// that is starting), up to demoSettleLimit.
func (d *demoAgent) retrying(ctx context.Context, what, name string, args map[string]any) (map[string]any, error) {
	deadline := time.Now().Add(demoSettleLimit)
	for {
		out, err := d.call(ctx, what, name, args)
		var se *stepError
		if err == nil || !errors.As(err, &se) || se.code != "endpoint_not_ready" || time.Now().After(deadline) {
			return out, err
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// tour runs every step.
func (d *demoAgent) tour(ctx context.Context) error {
	if d.inProcess {
		defer d.stopPlayer()
	}
	err := d.steps(ctx)
	var se *stepError
	switch {
	case err == nil:
		fmt.Fprintf(d.out, "\nDone. Everything the agent did waits for you or is on record: %s/inbox, %s/screens, %s/runs, %s/flows\n", d.base, d.base, d.base, d.base)
		return nil
	case errors.As(err, &se):
		return refused("demo agent stopped at %v", se)
	case errors.Is(err, context.Canceled):
		return refused("interrupted: the tour stopped before step %d", d.step+1)
	}
	return err
}

func (d *demoAgent) steps(ctx context.Context) error {
	who, err := d.call(ctx, "connect", "runtime_status", map[string]any{})
	if err != nil {
		return err
	}
	id, kind := "?", "?"
	if p, ok := who["principal"].(map[string]any); ok {
		id, _ = p["id"].(string)
		kind, _ = p["kind"].(string)
	}
	where := d.base
	if d.inProcess {
		where = "the runtime in this process (what it does is stored in the data directory; the Run it starts reports to this process and is stopped when the tour ends)"
	}
	fmt.Fprintf(d.out, "Connected over MCP to %s as %s (%s).\n", where, id, kind)

	if err := d.propose(ctx); err != nil {
		return err
	}
	if err := d.showScreen(ctx); err != nil {
		return err
	}
	if err := d.player(ctx); err != nil {
		return err
	}
	return d.expense(ctx)
}

// propose stages a new plan on the demo profile.
func (d *demoAgent) propose(ctx context.Context) error {
	const what = "propose a profile change"
	plan := map[string]any{"formId": "profile", "controlId": "plan"}
	snap, err := d.call(ctx, what, "controls_inspect", map[string]any{"identity": plan})
	if err != nil {
		return err
	}
	current := ""
	if st, ok := snap["state"].(map[string]any); ok {
		current, _ = st["value"].(string)
	}
	want := "pro"
	if current == want {
		want = "team"
	}
	if _, err := d.call(ctx, what, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": want}); err != nil {
		return err
	}
	d.say(fmt.Sprintf("Proposed a profile change: plan %s → %s. An agent can only propose; it waits for you to apply or discard it.", orNone(current), want), "/inbox")
	return nil
}

// showScreen shows the demo payment screen.
func (d *demoAgent) showScreen(ctx context.Context) error {
	const what = "show the payment screen"
	text, _ := demo.Screen("payment")
	out, err := d.call(ctx, what, "show_screen", map[string]any{"screen": text})
	if err != nil {
		return err
	}
	id, _ := out["screen"].(string)
	if rej, _ := out["rejected"].([]any); len(rej) > 0 {
		return &stepError{step: d.step + 1, what: what, code: "screen_rejected", detail: fmt.Sprintf("%d lines were rejected: %v", len(rej), rej)}
	}
	d.say("Showed you the payment screen. Its Pay button asks you \"Pay $42.50?\" before anything is paid.", "/screens/"+id)
	return nil
}

// player starts the demo player, pauses it and resumes it.
func (d *demoAgent) player(ctx context.Context) error {
	const what = "start the demo player"
	out, err := d.call(ctx, what, "actors_run_spawn", map[string]any{"recipe": demoPlayerRun})
	if err != nil {
		return err
	}
	status, _ := out["status"].(string)
	if status != "running" {
		detail := "the player is not running"
		if e, _ := out["error"].(string); e != "" {
			detail += ": " + e
		}
		if tail, _ := out["stderr_tail"].(string); tail != "" {
			detail += "; it wrote: " + strings.TrimSpace(tail)
		}
		return &stepError{step: d.step + 1, what: what, code: "run_" + orNone(status), detail: detail + "; see " + d.base + "/runs/" + demoPlayerRun}
	}
	d.started = true
	verb := "Started"
	if out["reused"] == true {
		verb = "Found playing"
	}
	d.say(fmt.Sprintf("%s the demo player (Run %s, generation %v). It ticks along in its Trace.", verb, demoPlayerRun, out["generation"]), "/runs/"+demoPlayerRun)
	for _, step := range []struct{ action, event, line string }{
		{"pause", "player.paused", "Paused the player (Control pause); its Trace says player.paused."},
		{"resume", "player.resumed", "Resumed the player (Control resume); its Trace says player.resumed."},
	} {
		what := step.action + " the player"
		if _, err := d.retrying(ctx, what, "actors_control_apply", map[string]any{"target": "run:" + demoPlayerRun, "action": step.action}); err != nil {
			return err
		}
		if err := d.awaitTrace(ctx, what, step.event); err != nil {
			return err
		}
		d.say(step.line, "/runs/"+demoPlayerRun)
	}
	return nil
}

// stopPlayer kills the demo player a tour in process started: the player
// reports to this process, which is about to end, and would otherwise run
// on with nobody to report to. Ctrl-C does not skip it.
func (d *demoAgent) stopPlayer() {
	if !d.started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.call(ctx, "stop the demo player", "actors_control_apply", map[string]any{"target": "run:" + demoPlayerRun, "action": "kill"}); err != nil {
		fmt.Fprintf(d.out, "The demo player could not be stopped (%v); stop it with: assent run kill %s\n", err, demoPlayerRun)
		return
	}
	fmt.Fprintf(d.out, "Stopped the demo player: it reports to this process, which ends now.\n")
}

// awaitTrace waits, up to demoSettleLimit, for the player to report kind
// in its Trace.
func (d *demoAgent) awaitTrace(ctx context.Context, what, kind string) error {
	deadline := time.Now().Add(demoSettleLimit)
	for {
		out, err := d.call(ctx, what, "actors_inspect", map[string]any{"target": "run:" + demoPlayerRun, "view": "trace", "lines": 50})
		if err != nil {
			return err
		}
		b, _ := json.Marshal(out["items"])
		if strings.Contains(string(b), `"`+kind+`"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return &stepError{step: d.step + 1, what: what, code: "no_answer", detail: fmt.Sprintf("the player did not report %s within %s; see %s/runs/%s", kind, demoSettleLimit, d.base, demoPlayerRun)}
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// expense asks the expense Flow for its next step and waits for the
// person's decision.
func (d *demoAgent) expense(ctx context.Context) error {
	const what = "ask the expense Flow for its next step"
	out, err := d.call(ctx, what, "flows_prescribe", map[string]any{"instance": demoExpense})
	if err != nil {
		return err
	}
	dec, _ := out["decision"].(map[string]any)
	kind, _ := dec["kind"].(string)
	transition, _ := dec["transition"].(string)
	apr, _ := out["approval"].(map[string]any)
	if apr == nil {
		next, _ := out["next"].(string)
		d.say(fmt.Sprintf("Asked the expense Flow (%s) for its next step: %s %s. Nothing waits for a person: %s", demoExpense, kind, transition, next), "/flows/instances/"+demoExpense)
		return nil
	}
	id, _ := apr["id"].(string)
	d.say(fmt.Sprintf("Asked the expense Flow (%s, over the limit) for its next step: %s needs a person. Approval %s waits in your inbox.", demoExpense, transition, id), "/inbox")
	status, _ := apr["status"].(string)
	if status == "pending" {
		if d.wait <= 0 {
			fmt.Fprintf(d.out, "   Not waiting (--no-wait); decide it whenever you like.\n")
			return nil
		}
		fmt.Fprintf(d.out, "   Waiting up to %s for your decision (Ctrl-C stops waiting)…\n", d.wait)
		var err error
		apr, err = d.awaitDecision(ctx, id)
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(d.out, "   Stopped waiting; the request stays in your inbox.")
			return nil
		}
		if err != nil {
			return err
		}
		if apr == nil {
			fmt.Fprintf(d.out, "   No decision within %s; the request stays in your inbox.\n", d.wait)
			return nil
		}
	}
	d.outcome(apr)
	return nil
}

// awaitDecision polls the approval until it is decided, d.wait passes
// (nil, nil) or ctx ends.
func (d *demoAgent) awaitDecision(ctx context.Context, id string) (map[string]any, error) {
	const what = "wait for your decision"
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	for {
		out, err := d.call(wctx, what, "flows_inspect", map[string]any{"instance": demoExpense, "approval": id})
		if wctx.Err() != nil && ctx.Err() == nil {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if apr, _ := out["approval"].(map[string]any); apr != nil && apr["status"] != "pending" {
			return apr, nil
		}
		if err := sleepCtx(wctx, demoPollEvery); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, nil
		}
	}
}

// outcome prints a decided approval.
func (d *demoAgent) outcome(apr map[string]any) {
	switch apr["status"] {
	case "approved":
		d.say(fmt.Sprintf("You approved it: receipt %v. The expense moved on; the agent can now ask for the payment step.", apr["receipt"]), "/flows/instances/"+demoExpense)
	case "declined":
		d.say(fmt.Sprintf("You declined it (%v). The expense stays unpaid.", apr["reason"]), "/flows/instances/"+demoExpense)
	default:
		d.say(fmt.Sprintf("The approval is %v: the expense moved on before anyone decided.", apr["status"]), "/flows/instances/"+demoExpense)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
