package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/assent-run/assent/screen"
	"github.com/spf13/cobra"
)

func newScreenCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "screen",
		Short: "Check and outline Omni-IR screens offline",
		Long: `Screens are Omni-IR text (stream format 0.8): one component or piece of state
per line. check, describe and field read a screen or a value locally and need
no server; fetch asks a server's generate endpoint for one.`,
		Example: `  assent screen check --tools payments.confirm examples/screens/payment.omni
  assent screen describe --tools payments.confirm examples/screens/payment.omni
  assent screen field --component Input --props '{"required":true}' --value '""'`,
	}
	cmd.AddCommand(newScreenCheckCmd(c), newScreenDescribeCmd(c), newScreenFieldCmd(c), newScreenFetchCmd(c))
	return cmd
}

// screenFlags are the app declarations a screen is checked against.
type screenFlags struct {
	tools      []string
	assets     []string
	components string
	pictures   string
}

func (f *screenFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.tools, "tools", nil, "tool registry: comma-separated tool names (default none)")
	cmd.Flags().StringSliceVar(&f.assets, "assets", nil, "asset registry: comma-separated picture names (default none)")
	cmd.Flags().StringVar(&f.components, "components", "", "JSON `FILE` of app component declarations, {\"Name\": {…}}")
	cmd.Flags().StringVar(&f.pictures, "pictures", "", "JSON `FILE` of picture families, [{\"prefix\", \"id\", \"maxLength\"}]")
}

func (f *screenFlags) options() (screen.Options, error) {
	opts := screen.Options{Tools: f.tools, Assets: f.assets}
	if f.components != "" {
		data, err := os.ReadFile(f.components)
		if err != nil {
			return opts, refused("unreadable: reading --components: %v", err)
		}
		comps, err := screen.DeclareComponents(data)
		if err != nil {
			return opts, refused("--components %s: %v", f.components, err)
		}
		opts.Components = comps
	}
	if f.pictures != "" {
		data, err := os.ReadFile(f.pictures)
		if err != nil {
			return opts, refused("unreadable: reading --pictures: %v", err)
		}
		pics, err := screen.DeclarePictures(data)
		if err != nil {
			return opts, refused("--pictures %s: %v", f.pictures, err)
		}
		opts.Pictures = pics
	}
	return opts, nil
}

// parseInput streams the named file ("-" or none: standard input) through a
// parser and ends it.
func parseInput(c *cli, args []string, opts screen.Options) (*screen.Parser, error) {
	var r io.Reader = c.in
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, refused("%v", err)
		}
		defer f.Close()
		r = f
	}
	p := screen.NewParser(opts)
	if _, err := io.Copy(p, r); err != nil {
		return nil, refused("unreadable: reading the screen: %v", err)
	}
	p.End()
	return p, nil
}

type checkUpdate struct {
	Applied bool           `json:"applied"`
	Issues  []screen.Issue `json:"issues"`
}

func newScreenCheckCmd(c *cli) *cobra.Command {
	var f screenFlags
	var updates []string
	cmd := &cobra.Command{
		Use:   "check [FILE|-]",
		Short: "Check a screen and print what a parser makes of it, as JSON",
		Long: `Check reads a screen (a file, or standard input when FILE is - or absent),
checks every line against the catalog and the registries given, and prints
the result in the conformance suite's shape:

  {"issues": [{"line": N|null, "code": …, "message": …}],
   "nodes": {…}, "state": {…}, "mutations": {…}, "missing": […],
   "updates": [{"applied": bool, "issues": […]}]}

Nodes leave children out of props and write a $key as {"state": "$key"}.
Each --update FILE is applied in order to the ended screen as a live update;
"updates" appears only when --update is given, and nodes, state, mutations
and missing then describe the screen after the last one.

The tool and asset registries are empty unless given. The exit status is 0
when no issue is an error, 1 otherwise.`,
		Example: `  assent screen check --tools payments.confirm examples/screens/payment.omni
  printf 'root = Text("Hi")\n' | assent screen check
  assent screen check --tools payments.confirm --update examples/screens/payment-paid.update examples/screens/payment.omni`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			texts := make([]string, len(updates))
			for i, u := range updates {
				data, err := os.ReadFile(u)
				if err != nil {
					return refused("unreadable: reading --update: %v", err)
				}
				texts[i] = string(data)
			}
			p, err := parseInput(c, args, opts)
			if err != nil {
				return err
			}
			doc := p.Document()
			failed := doc.HasErrors()
			var results []checkUpdate
			for _, text := range texts {
				res, err := p.Update(text)
				if err != nil {
					return refused("%v", err)
				}
				issues := res.Issues
				if issues == nil {
					issues = []screen.Issue{}
				}
				results = append(results, checkUpdate{Applied: res.Applied, Issues: issues})
				if !res.Applied {
					failed = true
				}
			}
			if err := writeCheck(c.out, doc, results, len(updates) > 0); err != nil {
				return err
			}
			if failed {
				return silentExit(exitRefused)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringArrayVar(&updates, "update", nil, "apply the live update in `FILE` after the screen ends (repeatable, applied in order)")
	// The output is always JSON; --json is accepted like on other commands.
	cmd.Flags().Bool("json", true, "print JSON (always on)")
	_ = cmd.Flags().MarkHidden("json")
	return cmd
}

func writeCheck(w io.Writer, doc *screen.Document, updates []checkUpdate, withUpdates bool) error {
	var body map[string]json.RawMessage
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return err
	}
	issues := doc.Issues()
	if issues == nil {
		issues = []screen.Issue{}
	}
	out := struct {
		Issues    []screen.Issue  `json:"issues"`
		Nodes     json.RawMessage `json:"nodes"`
		State     json.RawMessage `json:"state"`
		Mutations json.RawMessage `json:"mutations"`
		Missing   json.RawMessage `json:"missing"`
		Updates   []checkUpdate   `json:"updates,omitempty"`
	}{issues, body["nodes"], body["state"], body["mutations"], body["missing"], nil}
	if withUpdates {
		out.Updates = updates
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func newScreenDescribeCmd(c *cli) *cobra.Command {
	var f screenFlags
	var values, asJSON bool
	cmd := &cobra.Command{
		Use:   "describe [FILE|-]",
		Short: "Print a screen's plain-text outline",
		Long: `Describe reads a screen (a file, or standard input when FILE is - or absent)
and prints its outline: one component per line, indented two spaces per
level, as a model reads it. Values that fields edit show as [hidden] unless
--values is given. Lines the parser rejected are left out; run
'assent screen check' to see why.`,
		Example: `  assent screen describe --tools payments.confirm examples/screens/payment.omni
  assent screen describe --values --json --tools payments.confirm examples/screens/payment.omni`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			p, err := parseInput(c, args, opts)
			if err != nil {
				return err
			}
			outline := screen.Describe(p.Document(), values)
			if asJSON {
				issues := p.Document().Issues()
				if issues == nil {
					issues = []screen.Issue{}
				}
				enc := json.NewEncoder(c.out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Outline string         `json:"outline"`
					Issues  []screen.Issue `json:"issues"`
				}{outline, issues})
			}
			_, err = fmt.Fprintln(c.out, outline)
			if n := countErrors(p.Document()); n > 0 {
				fmt.Fprintf(c.err, "assent: the screen has %d error(s); run 'assent screen check' with the same file and flags for details (a tool or picture the app registers is named with --tools or --assets)\n", n)
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&values, "values", false, "show the values fields hold")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"outline\", \"issues\"} as JSON")
	return cmd
}

func countErrors(doc *screen.Document) int {
	n := 0
	for _, i := range doc.Issues() {
		if i.Severity == screen.SeverityError {
			n++
		}
	}
	return n
}
