package screens

import (
	"reflect"
	"testing"

	"github.com/assent-run/assent/tool"
)

// show_screen's advertised limit is the one the part enforces.
func TestShowScreenLimitIsAdvertised(t *testing.T) {
	s, err := tool.SchemaFor(reflect.TypeFor[showScreenArgs](), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Properties["screen"].MaxLength; m == nil || *m != maxScreenChars {
		t.Fatalf("screen maxLength %v, want %d", m, maxScreenChars)
	}
}
