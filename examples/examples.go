// Package examples holds assent's example screens (Omni IR streams) and
// Control Programs, embedded so that the demo workspace shows the very
// files the documentation points to.
package examples

import (
	"embed"
	"io/fs"
	"path"
	"strings"
)

//go:embed screens/*.omni flows/*.json
var files embed.FS

// Screens returns the example screens by name ("payment" for
// screens/payment.omni).
func Screens() map[string]string {
	out := map[string]string{}
	names, _ := fs.Glob(files, "screens/*.omni")
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			continue
		}
		out[strings.TrimSuffix(path.Base(n), ".omni")] = string(b)
	}
	return out
}

// Programs returns the example Control Programs' sources by file name
// ("expense-approval.json").
func Programs() map[string][]byte {
	out := map[string][]byte{}
	names, _ := fs.Glob(files, "flows/*.json")
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			continue
		}
		out[path.Base(n)] = b
	}
	return out
}
