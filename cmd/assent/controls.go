package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apitypes "github.com/assent-run/assent/api"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/control"
)

func newControlsCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controls",
		Short: "List, inspect and command the controls of a running server, and read its audit log",
		Long: `Clients of a running assent server (--url or ASSENT_URL; the token in ASSENT_TOKEN or --token-file).

Commands run with the source your token's kind gives: an agent's apply, clear,
undo or discard is refused with human_confirmation_required; a person applies
proposals in the web inbox.`,
		Example: `  assent controls list --form profile
  assent controls inspect profile/email
  assent controls exec stage profile/plan --value pro
  assent controls audit --form profile --json`,
	}
	cmd.AddCommand(newControlsListCmd(c), newControlsInspectCmd(c), newControlsExecCmd(c), newControlsAuditCmd(c))
	return cmd
}

// controlAddress returns the address the commands take for the control
// of s.
func controlAddress(s control.Snapshot) string {
	a := address{form: s.Identity.FormID, control: s.Identity.ControlID}
	if s.Identity.Subject != nil {
		a.subjectType, a.subjectID = s.Identity.Subject.Type, s.Identity.Subject.ID
	}
	return a.String()
}

// controlValue writes the live value of s as the server sent it, or
// (hidden).
func controlValue(s control.Snapshot) string {
	if s.State.ValueRedacted {
		return "(hidden)"
	}
	return jsonText(s.State.Value)
}

// controlStaged writes the proposal staged on s, or "" when none is.
func controlStaged(s control.Snapshot) string {
	if s.State.Staged == nil {
		return ""
	}
	v := "(hidden)"
	if !s.State.ValueRedacted && !s.State.StagedValueRedacted {
		v = jsonText(s.State.StagedValue)
	}
	out := fmt.Sprintf("%s (rev %d", v, s.State.Staged.Revision)
	if s.State.Staged.Stale {
		out += ", stale"
	}
	return out + ")"
}

// jsonText writes a value decoded with json.Number as compact JSON,
// without escaping HTML characters, as the server writes it.
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// decodeExact decodes an answer keeping numbers in untyped values as the
// server wrote them.
func decodeExact(raw []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(out)
}

func newControlsListCmd(c *cli) *cobra.Command {
	var (
		o      clientOpts
		form   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List controls (values hidden for secret or unreadable controls)",
		Example: "  assent controls list\n  assent controls list --form profile --json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := newAPIClient(o)
			if err != nil {
				return err
			}
			path := "/v1/controls"
			if form != "" {
				path += "?formId=" + url.QueryEscape(form)
			}
			var raw json.RawMessage
			if err := api.Do(cmd.Context(), "GET", path, nil, &raw); err != nil {
				return failAPI(err)
			}
			if asJSON {
				_, err := c.out.Write(raw)
				return err
			}
			var body apitypes.ControlList
			if err := decodeExact(raw, &body); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CONTROL\tKIND\tLABEL\tVALUE\tSTAGED")
			for _, s := range body.Controls {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", controlAddress(s), s.Metadata.Kind, s.Metadata.Label, clip(controlValue(s), 40), clip(controlStaged(s), 40))
			}
			return tw.Flush()
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().StringVar(&form, "form", "", "only this form's controls")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// An address names a control on the command line: FORM/CONTROL, or
// FORM/CONTROL@TYPE:ID for a control about a subject. In each part, "%",
// "/", "@" and ":" may be written %25, %2F, %40 and %3A, and must be where
// they would end the part: a form orders/2024 is orders%2F2024.
type address struct {
	form, control, subjectType, subjectID string
}

// addressEscaper writes, in one part of an address, the characters that
// separate parts.
var addressEscaper = strings.NewReplacer("%", "%25", "/", "%2F", "@", "%40", ":", "%3A")

// String writes a as parseAddress reads it.
func (a address) String() string {
	s := addressEscaper.Replace(a.form) + "/" + addressEscaper.Replace(a.control)
	if a.subjectType != "" || a.subjectID != "" {
		s += "@" + addressEscaper.Replace(a.subjectType) + ":" + addressEscaper.Replace(a.subjectID)
	}
	return s
}

func parseAddress(s string) (address, error) {
	var a address
	base, subj, hasSubj := strings.Cut(s, "@")
	form, ctl, ok := strings.Cut(base, "/")
	if !ok || form == "" || ctl == "" {
		return address{}, usageErr("a control is addressed as FORM/CONTROL or FORM/CONTROL@TYPE:ID, not %q", s)
	}
	parts := []*string{&a.form, &a.control}
	raw := []string{form, ctl}
	if hasSubj {
		t, id, ok := strings.Cut(subj, ":")
		if !ok || t == "" || id == "" {
			return address{}, usageErr("a subject is written TYPE:ID, not %q", subj)
		}
		parts = append(parts, &a.subjectType, &a.subjectID)
		raw = append(raw, t, id)
	}
	for i, r := range raw {
		v, err := url.PathUnescape(r)
		if err != nil {
			return address{}, usageErr("%q in the address %q: a %% starts an escape such as %%2F (for /); write a %% itself as %%25", r, s)
		}
		*parts[i] = v
	}
	return a, nil
}

// controlIdentity returns the identity a names.
func (a address) controlIdentity() control.Identity {
	id := control.Identity{FormID: a.form, ControlID: a.control}
	if a.subjectType != "" {
		id.Subject = &control.Subject{Type: a.subjectType, ID: a.subjectID}
	}
	return id
}

func (a address) identity() map[string]any {
	id := map[string]any{"formId": a.form, "controlId": a.control}
	if a.subjectType != "" {
		id["subject"] = map[string]string{"type": a.subjectType, "id": a.subjectID}
	}
	return id
}

func newControlsInspectCmd(c *cli) *cobra.Command {
	var o clientOpts
	cmd := &cobra.Command{
		Use:   "inspect FORM/CONTROL[@TYPE:ID]",
		Short: "Print one control's snapshot as JSON",
		Long: `Print one control's snapshot as JSON. A control about one subject (one
order, one customer) is addressed FORM/CONTROL@TYPE:ID, such as
orders/status@order:42. Within a part, write %, /, @ and : as %25, %2F, %40
and %3A where they would end the part (a form orders/2024 is orders%2F2024);
"controls list" writes addresses that way.`,
		Example: "  assent controls inspect profile/email\n  assent controls inspect profile/plan",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := parseAddress(args[0])
			if err != nil {
				return err
			}
			api, err := newAPIClient(o)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := api.Do(cmd.Context(), "GET", client.ControlPath(a.controlIdentity()), nil, &raw); err != nil {
				return failAPI(err)
			}
			return printRaw(c.out, raw)
		},
	}
	addClientFlags(cmd, &o)
	return cmd
}

func newControlsExecCmd(c *cli) *cobra.Command {
	var (
		o          clientOpts
		value      string
		durationMs int
		revision   int64
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "exec ACTION FORM/CONTROL[@TYPE:ID]",
		Short: "Run one command: focus, reveal, highlight, explain, validate, stage, apply, clear, undo or discard",
		Long: `Run one command on a control. --value is plain text unless it reads as
JSON: --value pro stages the string "pro"; --value 42, --value true,
--value null, --value '{"a":1}' and --value '["a"]' are JSON; to send text
that looks like JSON, quote it: --value '"42"'.`,
		Example: `  assent controls exec stage profile/plan --value pro
  assent controls exec stage profile/displayName --value "Ada King"
  assent controls exec explain profile/apiKey --json`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := parseAddress(args[1])
			if err != nil {
				return err
			}
			body := map[string]any{"action": args[0], "identity": a.identity()}
			if cmd.Flags().Changed("value") {
				v, err := parseValue(value)
				if err != nil {
					return err
				}
				body["value"] = v
			}
			if durationMs != 0 {
				body["durationMs"] = durationMs
			}
			if revision != 0 {
				body["revision"] = revision
			}
			api, err := newAPIClient(o)
			if err != nil {
				return err
			}
			status, raw, err := api.Send(cmd.Context(), "POST", "/v1/controls/execute", body)
			if err != nil {
				return failAPI(err)
			}
			var res struct {
				OK      *bool  `json:"ok"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			json.Unmarshal(raw, &res)
			if e, isErr := client.ErrorOf(status, raw); isErr && res.OK == nil {
				// An error that is not a registry result (a refused
				// command is one, with the error beside its fields).
				return failAPI(e)
			}
			if res.OK == nil {
				res.OK = new(bool)
			}
			if asJSON {
				printRaw(c.out, raw)
			} else if *res.OK {
				fmt.Fprintf(c.out, "%s %s: ok\n", args[0], args[1])
			}
			if !*res.OK {
				return refused("%s: %s", res.Reason, res.Message)
			}
			return nil
		},
	}
	addClientFlags(cmd, &o)
	f := cmd.Flags()
	f.StringVar(&value, "value", "", "the value (stage, apply): plain text is a string; a number, true, false, null, an object, an array or a quoted \"string\" is read as JSON")
	f.IntVar(&durationMs, "duration-ms", 0, "highlight duration, 0 to 60000")
	f.Int64Var(&revision, "revision", 0, "the proposal revision you saw (apply, discard)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newControlsAuditCmd(c *cli) *cobra.Command {
	var (
		o      clientOpts
		form   string
		after  int64
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "audit",
		Short:   "Print the durable audit log of control commands",
		Example: "  assent controls audit --form profile\n  assent controls audit --after 120 --limit 50 --json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := newAPIClient(o)
			if err != nil {
				return err
			}
			q := client.AuditQuery{FormID: form, After: after, Limit: limit}
			var raw json.RawMessage
			if err := api.Do(cmd.Context(), "GET", "/v1/audit?"+q.Values().Encode(), nil, &raw); err != nil {
				return failAPI(err)
			}
			if asJSON {
				return printRaw(c.out, raw)
			}
			var body apitypes.AuditList
			if err := json.Unmarshal(raw, &body); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tPRINCIPAL\tSOURCE\tCONTROL\tACTION\tRESULT")
			for _, r := range body.Records {
				result := "ok"
				if !r.OK {
					result = r.Reason
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s/%s\t%s\t%s\n", r.Seq, r.Time.Format(time.RFC3339Nano), r.PrincipalID, r.Source, r.FormID, r.ControlID, r.Action, result)
			}
			return tw.Flush()
		},
	}
	addClientFlags(cmd, &o)
	f := cmd.Flags()
	f.StringVar(&form, "form", "", "only this form")
	f.Int64Var(&after, "after", 0, "only records after this sequence number")
	f.IntVar(&limit, "limit", 0, "at most this many records (1-1000)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// parseValue reads a --value: a number, true, false, null, an object, an
// array or a quoted string is JSON; any other text is the string itself.
// Text that starts like an object or an array but is not valid JSON is
// refused rather than sent as a string.
func parseValue(s string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err == nil {
		return v, nil
	} else if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		return nil, usageErr("invalid_value: --value starts like JSON but is not valid JSON (%v); quote it to send it as text: --value '\"%s\"'", err, s)
	}
	return s, nil
}

func printRaw(w io.Writer, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		_, err := w.Write(raw)
		return err
	}
	return printJSON(w, v)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
