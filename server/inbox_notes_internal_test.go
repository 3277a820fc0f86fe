package server

import (
	"strconv"
	"strings"
	"testing"
)

func TestControlOfItem(t *testing.T) {
	tests := []struct {
		id      string
		control string
		rev     int64
		ok      bool
	}{
		{"control_proposal:profile/plan@3", "profile/plan", 3, true},
		{"control_proposal:orders/status@order:1@12", "orders/status@order:1", 12, true},
		{"control_proposal:profile/plan@x", "", 0, false},
		{"control_proposal:@3", "", 0, false},
		{"flow_approval:apr_1@4", "", 0, false},
		{"control_proposal:profile/plan", "", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		c, rev, ok := controlOfItem(tt.id)
		if c != tt.control || rev != tt.rev || ok != tt.ok {
			t.Errorf("controlOfItem(%q) = %q, %d, %v; want %q, %d, %v", tt.id, c, rev, ok, tt.control, tt.rev, tt.ok)
		}
	}
}

// FuzzControlOfItem checks that any item id is read without panicking,
// and that what it reads names the id back.
func FuzzControlOfItem(f *testing.F) {
	for _, s := range []string{"control_proposal:profile/plan@3", "control_proposal:a@b@-1", "question:x@1", "control_proposal:@", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		c, rev, ok := controlOfItem(id)
		if !ok {
			return
		}
		if c == "" {
			t.Fatalf("controlOfItem(%q) reads an empty control", id)
		}
		i := strings.LastIndex(id, "@")
		n, err := strconv.ParseInt(id[i+1:], 10, 64)
		if id != "control_proposal:"+c+"@"+id[i+1:] || err != nil || n != rev {
			t.Fatalf("controlOfItem(%q) = %q, %d", id, c, rev)
		}
	})
}
