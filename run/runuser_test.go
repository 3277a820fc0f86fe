package run

import (
	"os"
	"os/user"
	"path/filepath"
	"testing"
)

// In a user namespace that lacks the default uid range (a rootless
// container), the server still starts: every process shares the user
// nobody, and the choice is marked so the server warns. A range the
// operator named must be mapped.
func TestDefaultRunUIDsFallBackWhenUnmapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the run user is chosen only when the server runs as root")
	}
	if !rangedUIDsSupported {
		t.Skip("a uid for each Run needs Linux")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody to fall back to")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := write("small", "         0          0      65536\n")
	whole := write("whole", "         0          0 4294967295\n")

	a, err := resolveRunUserIn("", whole, whole)
	if err != nil || a == nil || !a.ranged || a.fellBack {
		t.Fatalf("with the default range mapped: %+v, %v; want each process its own uid", a, err)
	}
	a, err = resolveRunUserIn("", small, small)
	if err != nil || a == nil || a.ranged || !a.fellBack || a.name != "nobody" {
		t.Fatalf("with the default range unmapped: %+v, %v; want the shared user nobody, marked as a fallback", a, err)
	}
	if _, err := resolveRunUserIn(DefaultRunUIDs, small, small); err == nil {
		t.Fatal("a range the operator named that is not mapped was taken")
	}
}
