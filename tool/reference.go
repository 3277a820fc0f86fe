package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteReference writes a Markdown reference of the tools declared with
// New: for each one that is listed (not hidden), its title, description,
// annotations, an example call, and its input and output schemas. Tools
// registered at run time, with schemas computed then, are left out. intro
// is written after the title.
func WriteReference(w io.Writer, title, intro string, tools []Tool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", title, strings.TrimSpace(intro))
	var shown []Tool
	for _, t := range tools {
		if !t.Hidden && t.Owner == "" && t.Example != nil {
			shown = append(shown, t)
		}
	}
	for _, t := range shown {
		fmt.Fprintf(&b, "- [`%s`](#%s) — %s\n", t.Name, t.Name, t.Title)
	}
	for _, t := range shown {
		if err := writeTool(&b, t); err != nil {
			return fmt.Errorf("reference of %s: %w", t.Name, err)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func writeTool(b *bytes.Buffer, t Tool) error {
	fmt.Fprintf(b, "\n## %s\n\n", t.Name)
	if t.Title != "" {
		fmt.Fprintf(b, "**%s**\n\n", t.Title)
	}
	fmt.Fprintf(b, "%s\n\n", strings.TrimSpace(t.Description))
	a := t.Annotations
	fmt.Fprintf(b, "Annotations: `readOnlyHint: %v`, `destructiveHint: %v`, `idempotentHint: %v`, `openWorldHint: %v`.\n", a.ReadOnly, a.Destructive, a.Idempotent, a.OpenWorld)
	if t.Example != nil {
		call, err := json.Marshal(struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{t.Name, t.Example})
		if err != nil {
			return err
		}
		if err := writeJSON(b, "Example call (`tools/call` params)", call); err != nil {
			return err
		}
	}
	in := t.InputSchema
	if in == nil {
		in = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	}
	if err := writeJSON(b, "Input schema", in); err != nil {
		return err
	}
	out := t.OutputSchema
	if out == nil {
		out = json.RawMessage(`{"type":"object","additionalProperties":true}`)
	}
	return writeJSON(b, "Output schema", out)
}

// writeJSON writes a heading and v, indented, in a fenced block.
func writeJSON(b *bytes.Buffer, heading string, v json.RawMessage) error {
	var ind bytes.Buffer
	if err := json.Indent(&ind, v, "", "  "); err != nil {
		return err
	}
	fmt.Fprintf(b, "\n### %s\n\n```json\n%s\n```\n", heading, ind.String())
	return nil
}
