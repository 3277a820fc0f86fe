package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTokenLink(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := execute(append(args, "--data", dir), strings.NewReader(""), &out, &errw)
		return code, out.String(), errw.String()
	}
	if code, out, _ := run("token", "create", "--kind", "human", "--name", "alice"); code != 0 {
		t.Fatalf("create alice: %d %s", code, out)
	}
	if code, out, _ := run("token", "create", "--kind", "agent", "--name", "planner"); code != 0 {
		t.Fatalf("create planner: %d %s", code, out)
	}
	link := func() string {
		t.Helper()
		code, out, errs := run("token", "link", "alice")
		i := strings.Index(out, "/signin/")
		if code != 0 || i < 0 {
			t.Fatalf("link: %d %q %q", code, out, errs)
		}
		return strings.TrimSpace(out[i:])
	}
	if a, b := link(), link(); a == b {
		t.Fatalf("two calls printed the same link %q", a)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown person", []string{"token", "link", "bob"}, exitRefused, "not_found"},
		{"an agent is not a person", []string{"token", "link", "planner"}, exitRefused, "not_found"},
		{"no name", []string{"token", "link"}, exitUsage, ""},
		{"a second person of one name", []string{"token", "create", "--kind", "human", "--name", "alice"}, exitRefused, "already_exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := run(tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tt.code, tt.want)
			}
		})
	}
}

// TestTokenLinkPointsAtTheServer: with no --base-url, a link points where
// assent serve on the store last listened, not at the default address.
func TestTokenLinkPointsAtTheServer(t *testing.T) {
	s := serveInProcess(t, "--data", t.TempDir())
	var out, errw bytes.Buffer
	if code := execute([]string{"token", "link", "owner", "--data", s.dir}, strings.NewReader(""), &out, &errw); code != 0 {
		t.Fatalf("link: %d %s", code, errw.String())
	}
	if !strings.Contains(out.String(), s.base+"/signin/") {
		t.Fatalf("the link does not point at the server on %s:\n%s", s.base, out.String())
	}
	out.Reset()
	if code := execute([]string{"token", "link", "owner", "--data", s.dir, "--base-url", "https://assent.example"}, strings.NewReader(""), &out, &errw); code != 0 || !strings.Contains(out.String(), "https://assent.example/signin/") {
		t.Fatalf("--base-url: %d %s", code, out.String())
	}
}
