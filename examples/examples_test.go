package examples_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/assent-run/assent/examples"
)

// Every example file on disk is embedded, under its name.
func TestEmbedsEveryExample(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		got     func() int
	}{
		{"screens/*.omni", func() int { return len(examples.Screens()) }},
		{"flows/*.json", func() int { return len(examples.Programs()) }},
	} {
		onDisk, err := filepath.Glob(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(onDisk) == 0 || tc.got() != len(onDisk) {
			t.Errorf("%s: %d embedded, %d on disk", tc.pattern, tc.got(), len(onDisk))
		}
	}
	want, err := os.ReadFile("screens/payment.omni")
	if err != nil {
		t.Fatal(err)
	}
	if examples.Screens()["payment"] != string(want) {
		t.Error("the payment screen differs from screens/payment.omni")
	}
}
