package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apitypes "github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
)

// newFlowServedCmds are the flow commands that talk to a running server:
// load, start, list, inspect, prescribe and apply.
func newFlowServedCmds(c *cli) []*cobra.Command {
	return []*cobra.Command{
		newFlowLoadCmd(c), newFlowStartCmd(c), newFlowListCmd(c),
		newFlowInspectCmd(c), newFlowPrescribeCmd(c), newFlowApplyCmd(c),
	}
}

// servedFlags are the flags every served flow command has.
type servedFlags struct {
	client clientOpts
	json   bool
}

func (f *servedFlags) register(cmd *cobra.Command) {
	addClientFlags(cmd, &f.client)
	cmd.Flags().BoolVar(&f.json, "json", false, "print the server's JSON answer")
}

// call sends one request and decodes the answer into out, keeping the raw
// JSON for --json.
func (f *servedFlags) call(cmd *cobra.Command, method, path string, body any, out any) (json.RawMessage, error) {
	api, err := newAPIClient(f.client)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := api.Do(cmd.Context(), method, path, body, &raw); err != nil {
		return nil, failAPI(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("the server's answer is not what this client expects: %v", err)
		}
	}
	return raw, nil
}

// keyValues parses repeated NAME=VALUE flags.
func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--%s %q is not NAME=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func newFlowLoadCmd(c *cli) *cobra.Command {
	var (
		sf       servedFlags
		reason   string
		deadline string
	)
	cmd := &cobra.Command{
		Use:   "load FILE|-",
		Short: "Load a Control Program into a running server",
		Long: `Load sends a program to the server, which validates it with the server's
inventory and stores it by fingerprint. Loading the same program again is
harmless. An invalid program is refused with its errors (exit status 1).

Loading is a person's or the operator's act: with a person's token, or a
service token granted flow.load, the program is active at once and becomes
the one its program id names. With any other token (an agent's) it is only
proposed: it starts nothing until a person approves it in the web inbox,
whose card shows --reason, the proposer's own words on why. With --deadline
(or the server's --decision-deadline for program), a proposal no person
decides in time is declined with the reason "no decision before the deadline".`,
		Example: `  assent flow load examples/flows/expense-approval.json
  assent flow load examples/flows/expense-approval.json --reason "Expenses over 5,000 EUR need two people"
  assent flow load examples/flows/expense-approval.json --deadline 24h
  cat program.json | assent flow load - --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.readInput(args[0])
			if err != nil {
				return err
			}
			var p apitypes.ProgramView
			q := url.Values{}
			if reason != "" {
				q.Set("reason", reason)
			}
			if deadline != "" {
				d, err := parseDays(deadline)
				if err != nil || d < minDecisionDeadline || d > maxDecisionDeadline || d%time.Second != 0 {
					return usageErr("--deadline %q is not a whole number of seconds from 1s to 30d, such as 90m, 24h or 3d", deadline)
				}
				q.Set("deadline_seconds", strconv.FormatInt(int64(d/time.Second), 10))
			}
			path := "/v1/flows/programs"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			raw, err := sf.call(cmd, "POST", path, bytes.NewReader(data), &p)
			if err != nil {
				return err
			}
			if sf.json {
				_, err := c.out.Write(raw)
				return err
			}
			var pending apitypes.ProgramProposal
			if json.Unmarshal(raw, &pending) == nil && pending.Status == "pending_approval" {
				q := pending.Program
				fmt.Fprintf(c.out, "proposed %s %s (%d transitions)\n%s\na person must approve it in the web inbox before it starts anything: %s\n", q.ProgramID, q.ProgramVersion, q.Transitions, q.Fingerprint, pending.URL)
				if !pending.Deadline.IsZero() {
					fmt.Fprintf(c.out, "declined unless decided by %s\n", pending.Deadline.UTC().Format(time.RFC3339))
				}
				return nil
			}
			fmt.Fprintf(c.out, "loaded %s %s (%d transitions)\n%s\n", p.ProgramID, p.ProgramVersion, p.Transitions, p.Fingerprint)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why you propose the program, shown to the person who decides (at most 500 characters)")
	cmd.Flags().StringVar(&deadline, "deadline", "", "how long a proposed program waits for a person before it is declined, such as 90m, 24h or 3d (1s to 30d; default: the server's --decision-deadline for program)")
	return cmd
}

func newFlowStartCmd(c *cli) *cobra.Command {
	var (
		sf                   servedFlags
		id, phase, objective string
		facts                []string
	)
	cmd := &cobra.Command{
		Use:   "start PROGRAM --phase PHASE [--fact FACET=VALUE]... [--objective ID] [--id ID]",
		Short: "Start an instance of a loaded program",
		Long: `Start creates an instance of an active program (named by fingerprint, or by
program id: the active program with that id a person or the operator loaded
or approved last). The instance belongs to the
token's principal: nobody else can inspect or drive it.

--fact sets a fact to a known value; the server answers with the instance.

An agent starts an instance in one of the program's entry phases (those no
transition leads into, such as draft) and does not give the facts its
transitions establish (such as an approval): the rest of the way goes through
the program's transitions. A person or a service may start anywhere. The
application may check the facts too: the demo expense program sets
expense.amount_band from expense.amount.`,
		Example: `  assent flow start expense-approval --phase draft --fact "expense.amount=1250.00 EUR" --objective expense-paid
  assent flow start sha256:611240d8… --phase ready --fact build.status=passed --id deploy-42 --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if phase == "" {
				return usageErr("--phase is required: the phase the instance starts in")
			}
			kv, err := keyValues("fact", facts)
			if err != nil {
				return err
			}
			body := map[string]any{"program": args[0], "phase": phase}
			if id != "" {
				body["id"] = id
			}
			if objective != "" {
				body["objective"] = objective
			}
			if len(kv) > 0 {
				fm := make(map[string]flow.Fact, len(kv))
				for k, v := range kv {
					fm[k] = flow.Fact{Status: flow.StatusKnown, Value: v}
				}
				body["facts"] = fm
			}
			var inst flow.Instance
			raw, err := sf.call(cmd, "POST", "/v1/flows/instances", body, &inst)
			if err != nil {
				return err
			}
			if sf.json {
				_, err := c.out.Write(raw)
				return err
			}
			fmt.Fprintf(c.out, "started %s in phase %s (revision %d)\n", inst.ID, inst.Phase, inst.Revision)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&phase, "phase", "", "the phase the instance starts in (required)")
	cmd.Flags().StringArrayVar(&facts, "fact", nil, "a fact FACET=VALUE, known (repeatable)")
	cmd.Flags().StringVar(&objective, "objective", "", "the objective the instance pursues")
	cmd.Flags().StringVar(&id, "id", "", "the instance id (default: a random ins-… id)")
	return cmd
}

func newFlowListCmd(c *cli) *cobra.Command {
	var sf servedFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the loaded programs and the instances you can see",
		Example: "  assent flow list\n  assent flow list --json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var progs apitypes.ProgramList
			rawP, err := sf.call(cmd, "GET", "/v1/flows/programs", nil, &progs)
			if err != nil {
				return err
			}
			var insts apitypes.InstanceList
			rawI, err := sf.call(cmd, "GET", "/v1/flows/instances", nil, &insts)
			if err != nil {
				return err
			}
			if sf.json {
				return printJSON(c.out, map[string]json.RawMessage{"programs": jsonMember(rawP, "programs"), "instances": jsonMember(rawI, "instances")})
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROGRAM\tVERSION\tTRANSITIONS\tFINGERPRINT")
			for _, p := range progs.Programs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", p.ProgramID, p.ProgramVersion, p.Transitions, p.Fingerprint)
			}
			tw.Flush()
			fmt.Fprintln(c.out)
			if len(insts.Instances) == 0 {
				fmt.Fprintln(c.out, "No instances. Start one with: assent flow start PROGRAM --phase PHASE")
				return nil
			}
			tw = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "INSTANCE\tPHASE\tOBJECTIVE\tREVISION")
			for _, in := range insts.Instances {
				phase := in.Phase
				if in.Recovery != nil {
					phase += " (needs recovery)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", in.ID, phase, in.Objective, in.Revision)
			}
			return tw.Flush()
		},
	}
	sf.register(cmd)
	return cmd
}

// jsonMember returns one member of a JSON object.
func jsonMember(raw json.RawMessage, name string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m[name]
}

func newFlowInspectCmd(c *cli) *cobra.Command {
	var (
		sf       servedFlags
		approval string
	)
	cmd := &cobra.Command{
		Use:   "inspect INSTANCE [--approval ID]",
		Short: "Show an instance: phase, facts, receipts, waiting approvals and journal",
		Example: `  assent flow inspect expense-1001
  assent flow inspect expense-1001 --approval apr-… --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/flows/instances/" + url.PathEscape(args[0])
			if approval != "" {
				path += "?approval=" + url.QueryEscape(approval)
			}
			var v apitypes.InstanceView
			raw, err := sf.call(cmd, "GET", path, nil, &v)
			if err != nil {
				return err
			}
			if sf.json {
				_, err := c.out.Write(raw)
				return err
			}
			printInstance(c.out, &v)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&approval, "approval", "", "also report on this approval request (apr-…), whatever its status")
	return cmd
}

func printInstance(w io.Writer, v *apitypes.InstanceView) {
	in := v.Instance
	fmt.Fprintf(w, "%s  %s  phase %s  revision %d", in.ID, v.Program.ProgramID, in.Phase, in.Revision)
	if in.Objective != "" {
		fmt.Fprintf(w, "  objective %s", in.Objective)
	}
	fmt.Fprintf(w, "\nprogram %s\n", in.Program)
	if r := in.Recovery; r != nil {
		fmt.Fprintf(w, "needs recovery after %s: %s\n", r.Transition, r.Cause)
	}
	fmt.Fprintln(w, "\nfacts:")
	if len(in.Facts) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, facet := range sortedFacets(in.Facts) {
		f := in.Facts[facet]
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", facet, f.Status, f.Value)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nreceipts:")
	if len(v.Receipts) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, r := range v.Receipts {
		fmt.Fprintf(w, "  %s  %s  revision %d→%d  phase %s  by %s\n", r.ID, r.Transition, r.FromRevision, r.Revision, r.Phase, r.Principal)
	}
	if len(v.Approvals) > 0 {
		fmt.Fprintln(w, "\nwaiting for a person:")
		for _, a := range v.Approvals {
			fmt.Fprintf(w, "  %s  %s  requested by %s\n", a.ID, a.Transition, a.Requester)
		}
	}
	if a := v.Approval; a != nil {
		fmt.Fprintf(w, "\napproval %s: %s", a.ID, a.Status)
		if a.Decider != "" {
			fmt.Fprintf(w, " by %s", a.Decider)
		}
		if a.Receipt != "" {
			fmt.Fprintf(w, ", receipt %s", a.Receipt)
		}
		if a.Reason != "" {
			fmt.Fprintf(w, " (%s)", a.Reason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\njournal:")
	if len(v.Journal) == 0 {
		fmt.Fprintln(w, "  (empty)")
	}
	for _, e := range v.Journal {
		fmt.Fprintf(w, "  %s  %s  revision %d  %s", e.At.Format("2006-01-02 15:04:05"), e.Transition, e.Revision, e.Status)
		if e.Error != "" {
			fmt.Fprintf(w, ": %s", e.Error)
		}
		fmt.Fprintln(w)
	}
}

func sortedFacets(m map[string]flow.Fact) []string { return slices.Sorted(maps.Keys(m)) }

func newFlowPrescribeCmd(c *cli) *cobra.Command {
	var (
		sf                    servedFlags
		transition, objective string
		params                []string
	)
	cmd := &cobra.Command{
		Use:   "prescribe INSTANCE [--transition ID] [--objective ID] [--param NAME=VALUE]...",
		Short: "Ask the kernel for the next step of one of your instances",
		Long: `Prescribe resolves the next step for your token's principal and stores the
prescription, which 'assent flow apply' applies within two minutes. When the
step needs a person, an approval request is filed in the web inbox; follow
it with 'assent flow inspect INSTANCE --approval ID'.

Exit status 1 for a REFUSED or UNRESOLVED decision.`,
		Example: `  assent flow prescribe expense-1001
  assent flow prescribe exp-7
  assent flow prescribe expense-1000 --transition reject --param reason=duplicate --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := keyValues("param", params)
			if err != nil {
				return err
			}
			req := flow.Request{Transition: transition, Objective: objective, Parameters: kv}
			var res apitypes.Prescription
			raw, err := sf.call(cmd, "POST", "/v1/flows/instances/"+url.PathEscape(args[0])+"/prescribe", req, &res)
			if err != nil {
				return err
			}
			d := res.Decision
			if sf.json {
				if _, err := c.out.Write(raw); err != nil {
					return err
				}
			} else {
				fmt.Fprint(c.out, d.Kind)
				if d.Transition != "" {
					fmt.Fprint(c.out, " ", d.Transition)
				}
				if d.Awaiting != "" {
					fmt.Fprint(c.out, " (awaiting ", d.Awaiting, ")")
				}
				fmt.Fprintln(c.out)
				if d.Code != "" {
					fmt.Fprintf(c.out, "%s: %s\n", d.Code, d.Message)
				} else if d.Message != "" {
					fmt.Fprintln(c.out, d.Message)
				}
				if p := d.Prescription; p != nil {
					fmt.Fprintf(c.out, "prescription %s (expires %s)\ncapabilities %s\n", p.ID, p.ExpiresAt.Format("15:04:05Z07:00"), strings.Join(p.EffectiveCapabilities, ", "))
				}
				if a := res.Approval; a != nil {
					fmt.Fprintf(c.out, "approval %s filed in the web inbox\n", a.ID)
				}
				for _, r := range d.Reasons {
					fmt.Fprintf(c.out, "  %s: %s\n", r.Transition, r.Message)
				}
				fmt.Fprintln(c.out, "next:", res.Next)
			}
			if d.Kind == flow.Refused || d.Kind == flow.Unresolved {
				return silentExit(exitRefused)
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&transition, "transition", "", "request this transition (local or qualified id)")
	cmd.Flags().StringVar(&objective, "objective", "", "pursue this objective when the instance has none")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a transition parameter NAME=VALUE (repeatable)")
	return cmd
}

func newFlowApplyCmd(c *cli) *cobra.Command {
	var (
		sf     servedFlags
		params []string
	)
	cmd := &cobra.Command{
		Use:   "apply PRESCRIPTION [--param NAME=VALUE]...",
		Short: "Apply a prescription issued to you and print the receipt",
		Long: `Apply applies a prescription from 'assent flow prescribe'. The kernel checks it
again (STALE_PRESCRIPTION, PRESCRIPTION_EXPIRED), runs the transition's effect
and commits a receipt. Applying the same prescription again prints the same
receipt. --param values, when given, must be the ones the prescription binds.`,
		Example: `  assent flow apply prx-3f1c…
  assent flow apply prx-3f1c… --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := keyValues("param", params)
			if err != nil {
				return err
			}
			var body any
			if kv != nil {
				body = map[string]any{"parameters": kv}
			}
			var r flow.Receipt
			raw, err := sf.call(cmd, "POST", "/v1/flows/prescriptions/"+url.PathEscape(args[0])+"/apply", body, &r)
			if err != nil {
				return err
			}
			if sf.json {
				_, err := c.out.Write(raw)
				return err
			}
			fmt.Fprintf(c.out, "committed %s on %s: revision %d → %d, phase %s\nreceipt %s\n", r.Transition, r.Instance, r.FromRevision, r.Revision, r.Phase, r.ID)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter NAME=VALUE the prescription binds (repeatable)")
	return cmd
}
