package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// printCompact writes v as one line of JSON, without HTML escaping.
func printCompact(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// columnOrder puts the columns people scan first at the left of a table.
var columnOrder = []string{"ts", "time", "at", "created_at", "run", "id", "name", "source", "kind", "action", "status", "state", "level", "attention", "summary"}

// maxColumns and maxCell bound a table so it fits a terminal.
const (
	maxColumns = 8
	maxCell    = 60
)

// printHuman writes a JSON object for people: scalars as "key: value"
// lines, nested objects indented under their key, lists of objects as
// tables and lists of scalars joined by commas.
func printHuman(w io.Writer, v map[string]any) error {
	writeHuman(w, v, "")
	return nil
}

func writeHuman(w io.Writer, v map[string]any, indent string) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	// Scalars first, then nested values, each group sorted.
	sort.Slice(keys, func(i, j int) bool {
		ni, nj := nested(v[keys[i]]), nested(v[keys[j]])
		if ni != nj {
			return !ni
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		switch x := v[k].(type) {
		case map[string]any:
			if len(x) == 0 {
				fmt.Fprintf(w, "%s%s: {}\n", indent, k)
				continue
			}
			fmt.Fprintf(w, "%s%s:\n", indent, k)
			writeHuman(w, x, indent+"  ")
		case []any:
			if rows, ok := objects(x); ok && len(rows) > 0 {
				fmt.Fprintf(w, "%s%s: %d\n", indent, k, len(rows))
				writeTable(w, rows, indent+"  ")
				continue
			}
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = cell(e)
			}
			fmt.Fprintf(w, "%s%s: %s\n", indent, k, strings.Join(parts, ", "))
		default:
			fmt.Fprintf(w, "%s%s: %s\n", indent, k, cell(x))
		}
	}
}

func nested(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) > 0
	case []any:
		rows, ok := objects(x)
		return ok && len(rows) > 0
	}
	return false
}

// objects returns list as objects when every element is one.
func objects(list []any) ([]map[string]any, bool) {
	rows := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		rows = append(rows, m)
	}
	return rows, true
}

// writeTable writes rows as aligned columns: the known columns first, then
// the others alphabetically, at most maxColumns of them.
func writeTable(w io.Writer, rows []map[string]any, indent string) {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r {
			seen[k] = true
		}
	}
	var cols []string
	for _, k := range columnOrder {
		if seen[k] {
			cols = append(cols, k)
			delete(seen, k)
		}
	}
	rest := make([]string, 0, len(seen))
	for k := range seen {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	cols = append(cols, rest...)
	if len(cols) > maxColumns {
		cols = cols[:maxColumns]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = strings.ToUpper(c)
	}
	fmt.Fprintf(tw, "%s%s\n", indent, strings.Join(head, "\t"))
	for _, r := range rows {
		line := make([]string, len(cols))
		for i, c := range cols {
			if v, ok := r[c]; ok {
				line[i] = clip(cell(v), maxCell)
			}
		}
		fmt.Fprintf(tw, "%s%s\n", indent, strings.Join(line, "\t"))
	}
	tw.Flush()
}

// cell renders one value on one line.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		return strings.Join(strings.Fields(x), " ")
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool, json.Number:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
