package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/flow"
	"github.com/spf13/cobra"
)

func newFlowCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flow",
		Short: "Check, fingerprint and resolve Control Programs (Flows); drive them on a server",
		Long: `A Flow is a Control Program: a JSON manifest that declares which transitions a
process may take, who may take them and with which capabilities.

check, fingerprint, canonical and resolve work offline, on files, without a
server. load, start, list, inspect, prescribe and apply are clients of a
running server (--url or ASSENT_URL; the token in ASSENT_TOKEN or
--token-file).`,
		Example: `  assent flow check examples/flows/expense-approval.json
  assent flow fingerprint examples/flows/deployment.json
  assent flow resolve examples/flows/deployment.json --state examples/flows/inputs/deployment-ready.json
  assent flow load examples/flows/expense-approval.json
  assent flow start expense-approval --phase draft --id exp-7 --fact "expense.amount=120.00 EUR" --fact expense.payee_iban=DE89370400440532013000 --objective expense-paid
  assent flow prescribe expense-1001`,
	}
	cmd.AddCommand(newFlowCheckCmd(c), newFlowFingerprintCmd(c), newFlowCanonicalCmd(c), newFlowResolveCmd(c))
	cmd.AddCommand(newFlowServedCmds(c)...)
	return cmd
}

// loadFlags are the flags that shape the runtime a program is loaded
// against.
type loadFlags struct {
	runtime      string
	capabilities []string
}

func (f *loadFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.runtime, "runtime", assent.Version, "runtime version compared with requires_runtime (MAJOR.MINOR.PATCH)")
	cmd.Flags().StringArrayVar(&f.capabilities, "capability", nil, "add an application capability to the known vocabulary (repeatable)")
}

func (f *loadFlags) inventory() (*flow.Inventory, error) {
	if !flow.ValidRuntimeVersion(f.runtime) {
		return nil, usageErr("--runtime %q is not a version like 0.1.0", f.runtime)
	}
	inv := flow.NewInventory(f.runtime)
	for _, name := range f.capabilities {
		if err := inv.RegisterCapability(name); err != nil {
			return nil, usageErr("--capability %q is not a capability id (lowercase segments separated by '.' or '-')", name)
		}
	}
	return inv, nil
}

// readInput reads the named file, or standard input for "-".
func (c *cli) readInput(name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = c.in
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, refused("%v", err)
		}
		defer f.Close()
		r = f
	}
	// Read one byte past the limit so that the loader can report the size.
	data, err := io.ReadAll(io.LimitReader(r, flow.MaxDocumentSize+1))
	if err != nil {
		return nil, refused("unreadable: reading %s: %v", name, err)
	}
	return data, nil
}

// writeJSON writes v as one line of JSON without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// checkReport is the exact output of flow check.
type checkReport struct {
	OK          bool          `json:"ok"`
	ProgramID   *string       `json:"program_id"`
	Fingerprint *string       `json:"fingerprint"`
	Transitions int           `json:"transitions"`
	Errors      []*flow.Error `json:"errors"`
}

func newFlowCheckCmd(c *cli) *cobra.Command {
	var lf loadFlags
	cmd := &cobra.Command{
		Use:   "check [--runtime X.Y.Z] [--capability NAME]... FILE|-",
		Short: "Validate a Control Program and print a JSON report",
		Long: `Check decodes and validates a Control Program against this runtime's inventory
and prints one line of JSON:

  {"ok":bool,"program_id":…,"fingerprint":…,"transitions":N,"errors":[{"code","path","message"}]}

program_id is null when it cannot be read, fingerprint is null unless ok.
Exit status: 0 when the program is valid, 1 when it is not, 2 on usage errors.`,
		Example: `  assent flow check examples/flows/expense-approval.json
  assent flow check --runtime 0.2.0 --capability ledger.post examples/flows/deployment.json
  cat examples/flows/deployment.json | assent flow check -`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := lf.inventory()
			if err != nil {
				return err
			}
			data, err := c.readInput(args[0])
			if err != nil {
				return err
			}
			rep := checkReport{Errors: []*flow.Error{}}
			p, err := flow.Load(data, inv)
			if err == nil {
				id, fp := p.ID(), p.Fingerprint()
				rep.OK, rep.ProgramID, rep.Fingerprint, rep.Transitions = true, &id, &fp, p.Len()
			} else {
				rep.Errors = errorsOf(err)
				if m, _ := flow.Decode(data); m != nil {
					if m.ProgramID != "" {
						rep.ProgramID = &m.ProgramID
					}
					rep.Transitions = len(m.Transitions)
				}
			}
			if err := writeJSON(c.out, rep); err != nil {
				return err
			}
			if !rep.OK {
				return silentExit(exitRefused)
			}
			return nil
		},
	}
	lf.register(cmd)
	return cmd
}

func errorsOf(err error) []*flow.Error {
	var list flow.ErrorList
	if errors.As(err, &list) {
		return list
	}
	return []*flow.Error{{Code: flow.CodeProgramInvalid, Message: err.Error()}}
}

// loadProgram reads and loads a program, refusing with its errors. It also
// returns the inventory the program was loaded with.
func (c *cli) loadProgram(name string, lf *loadFlags) (*flow.Program, *flow.Inventory, error) {
	inv, err := lf.inventory()
	if err != nil {
		return nil, nil, err
	}
	data, err := c.readInput(name)
	if err != nil {
		return nil, nil, err
	}
	p, err := flow.Load(data, inv)
	if err != nil {
		errs := errorsOf(err)
		lines := make([]string, 0, len(errs))
		for _, e := range errs {
			lines = append(lines, e.Error())
		}
		return nil, nil, refused("%s is not a valid program:\n  %s\nRun 'assent flow check %s' for a JSON report.", name, strings.Join(lines, "\n  "), name)
	}
	return p, inv, nil
}

func newFlowFingerprintCmd(c *cli) *cobra.Command {
	var lf loadFlags
	cmd := &cobra.Command{
		Use:   "fingerprint [--runtime X.Y.Z] [--capability NAME]... FILE|-",
		Short: "Print a Control Program's fingerprint",
		Long: `Fingerprint prints "sha256:" and the 64 lowercase hex digits of the SHA-256 of
the program's canonical bytes, followed by a newline. Whitespace, key order, set
order, transition order and program_version do not change it.`,
		Example: `  assent flow fingerprint examples/flows/deployment.json`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := c.loadProgram(args[0], &lf)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.out, p.Fingerprint())
			return err
		},
	}
	lf.register(cmd)
	return cmd
}

func newFlowCanonicalCmd(c *cli) *cobra.Command {
	var lf loadFlags
	cmd := &cobra.Command{
		Use:   "canonical [--runtime X.Y.Z] [--capability NAME]... FILE|-",
		Short: "Print the exact canonical bytes a fingerprint hashes",
		Long: `Canonical prints the program's canonical executable representation: RFC 8785
(JCS) JSON of the normalized program, with no trailing newline. Piping it
through sha256sum gives the hex digits of the fingerprint.`,
		Example: `  assent flow canonical examples/flows/deployment.json | sha256sum`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := c.loadProgram(args[0], &lf)
			if err != nil {
				return err
			}
			_, err = c.out.Write(p.Canonical())
			return err
		},
	}
	lf.register(cmd)
	return cmd
}

func newFlowResolveCmd(c *cli) *cobra.Command {
	var (
		lf                            loadFlags
		statePath, principalPath, req string
		objective                     string
		params                        []string
	)
	cmd := &cobra.Command{
		Use:   "resolve FILE --state STATE.json [--principal P.json] [--request ID] [--param NAME=VALUE]...",
		Short: "Decide the next step of a program for a given state, offline",
		Long: `Resolve applies the kernel law to one state and prints the decision as JSON:
kind (PRESCRIBED, MARKED, FRONTIER, BLOCKED, REFUSED or UNRESOLVED), transition
(qualified id), candidates, reasons (one for every transition not chosen) and,
when PRESCRIBED, the prescription.

The state file holds an instance: {"phase", "facts": {facet: {"status",
"value"}}, "objective", "revision"} and optionally "instance_id" and
"program_fingerprint" (default: this program's). The principal file holds
{"id", "kind": human|agent|service, "grants": [...]}; without it the principal
is an agent "cli" granted the program's capability_surface except
human.approve.

Exit status: 0 when a decision is printed, 1 when it is REFUSED or UNRESOLVED or
an input is invalid, 2 on usage errors.`,
		Example: `  assent flow resolve examples/flows/deployment.json --state examples/flows/inputs/deployment-ready.json
  assent flow resolve examples/flows/expense-approval.json --state examples/flows/inputs/expense-submitted.json --principal examples/flows/inputs/approver.json --request approve`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if statePath == "" {
				return usageErr("--state is required\nRun 'assent flow resolve --help' for usage.")
			}
			parameters := map[string]string{}
			for _, kv := range params {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return usageErr("--param %q is not NAME=VALUE", kv)
				}
				parameters[name] = value
			}
			p, inv, err := c.loadProgram(args[0], &lf)
			if err != nil {
				return err
			}
			data, err := c.readInput(statePath)
			if err != nil {
				return err
			}
			inst, err := flow.DecodeInstance(data)
			if err != nil {
				return refused("%s: %v", statePath, err)
			}
			if inst.ID == "" {
				inst.ID = "instance"
			}
			if inst.Program == "" {
				inst.Program = p.Fingerprint()
			}
			pr := flow.Principal{ID: "cli", Kind: flow.AuthorityAgent}
			if principalPath != "" {
				data, err := c.readInput(principalPath)
				if err != nil {
					return err
				}
				if pr, err = flow.DecodePrincipal(data); err != nil {
					return refused("%s: %v", principalPath, err)
				}
			} else {
				m := p.Manifest()
				pr.Grants = slices.DeleteFunc(m.Capabilities.CapabilitySurface, func(s string) bool { return s == flow.CapabilityHumanApprove })
			}
			r := flow.Request{Transition: req, Objective: objective}
			if len(parameters) > 0 {
				r.Parameters = parameters
			}
			d := flow.Resolve(p, inv, &inst, &pr, r, time.Now())
			if err := writeJSON(c.out, d); err != nil {
				return err
			}
			if d.Kind == flow.Refused || d.Kind == flow.Unresolved {
				return silentExit(exitRefused)
			}
			return nil
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVar(&statePath, "state", "", "instance state file (JSON), or - for standard input")
	cmd.Flags().StringVar(&principalPath, "principal", "", "principal file (JSON): id, kind, grants")
	cmd.Flags().StringVar(&req, "request", "", "request this transition (local or qualified id)")
	cmd.Flags().StringVar(&objective, "objective", "", "pursue this objective when the state has none")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a transition parameter NAME=VALUE (repeatable)")
	return cmd
}
