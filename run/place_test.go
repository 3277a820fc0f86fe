package run

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPlaceRecipe(t *testing.T) {
	const (
		hello = `{"description":"says hello","template":"echo hello"}`
		bye   = `{"description":"says goodbye","template":"echo bye"}`
	)
	for _, tc := range []struct {
		name      string
		stem, def string
		replace   bool
		code      string // the error's code; "" for none
		placed    bool
		want      string // the file's content afterwards
	}{
		{name: "new", stem: "fresh", def: bye, placed: true, want: bye},
		{name: "kept", stem: "greet", def: bye, want: hello},
		{name: "replaced", stem: "greet", def: bye, replace: true, placed: true, want: bye},
		{name: "bad stem", stem: "../greet", def: bye, code: CodeInvalidRequest, want: hello},
		{name: "stem with .json", stem: "greet.json", def: bye, replace: true, code: CodeInvalidRequest, want: hello},
		{name: "not a Recipe", stem: "greet", def: `{"template":`, replace: true, code: CodeInvalidRecipe, want: hello},
		{name: "unknown field", stem: "greet", def: `{"template":"true","shell":"zsh"}`, replace: true, code: CodeInvalidRecipe, want: hello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if placed, err := f.m.PlaceRecipe("greet", []byte(hello), false); err != nil || !placed {
				t.Fatalf("placing greet: %v %v", placed, err)
			}
			placed, err := f.m.PlaceRecipe(tc.stem, []byte(tc.def), tc.replace)
			if (tc.code == "" && err != nil) || (tc.code != "" && !isCode(err, tc.code)) || placed != tc.placed {
				t.Fatalf("PlaceRecipe = %v, %v; want placed %v, code %q", placed, err, tc.placed, tc.code)
			}
			stem := tc.stem
			if tc.code != "" {
				stem = "greet"
			}
			_, raw, err := f.m.LoadRecipe(stem)
			if err != nil || string(raw) != tc.want {
				t.Fatalf("LoadRecipe(%s) = %s, %v; want %s", stem, raw, err, tc.want)
			}
			left, _ := filepath.Glob(filepath.Join(f.dir, "recipes", "*.tmp"))
			if len(left) != 0 {
				t.Fatalf("temporary files left: %v", left)
			}
			if _, err := os.Stat(filepath.Join(f.dir, "greet")); err == nil {
				t.Fatal("a stem with a path escaped the recipes directory")
			}
		})
	}
}
