package control

import (
	"strings"
	"testing"
)

func TestIdentityKey(t *testing.T) {
	subj := func(typ, id, label string) *Subject { return &Subject{Type: typ, ID: id, Label: label} }
	tests := []struct {
		name string
		a, b Identity
		same bool
	}{
		{"equal", profile, Identity{FormID: "profile", ControlID: "display-name"}, true},
		{"different control", profile, Identity{FormID: "profile", ControlID: "email"}, false},
		{"different form", profile, Identity{FormID: "billing", ControlID: "display-name"}, false},
		{"label ignored", Identity{"f", "c", subj("record", "1", "Ada")}, Identity{"f", "c", subj("record", "1", "Grace")}, true},
		{"subject vs none", Identity{"f", "c", subj("record", "1", "")}, Identity{"f", "c", nil}, false},
		{"empty subject vs none", Identity{"f", "c", subj("", "", "")}, Identity{"f", "c", nil}, false},
		{"separators do not collide", Identity{"f", "c", subj("record:x", "1", "")}, Identity{"f", "c", subj("record", "x:1", "")}, false},
		{"form/control separators", Identity{FormID: "a/b", ControlID: "c"}, Identity{FormID: "a", ControlID: "b/c"}, false},
		{"subject type vs id", Identity{"f", "c", subj("1", "record", "")}, Identity{"f", "c", subj("record", "1", "")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.same {
				t.Errorf("Equal = %v, want %v", got, tt.same)
			}
			if got := tt.a.Key() == tt.b.Key(); got != tt.same {
				t.Errorf("keys equal = %v, want %v", got, tt.same)
			}
		})
	}
}

func TestIdentityValidate(t *testing.T) {
	long := strings.Repeat("é", MaxIdentifierLength)
	tests := []struct {
		name string
		id   Identity
		want Reason
	}{
		{"ok", profile, ""},
		{"ok with subject", Identity{"f", "c", &Subject{Type: "row", ID: "1"}}, ""},
		{"longest", Identity{FormID: long, ControlID: "c"}, ""},
		{"empty form", Identity{ControlID: "c"}, ReasonInvalidRequest},
		{"empty control", Identity{FormID: "f"}, ReasonInvalidRequest},
		{"empty subject id", Identity{"f", "c", &Subject{Type: "row"}}, ReasonInvalidRequest},
		{"newline", Identity{FormID: "f\n", ControlID: "c"}, ReasonInvalidRequest},
		{"delete char", Identity{FormID: "f", ControlID: "c\x7f"}, ReasonInvalidRequest},
		{"control char in label", Identity{"f", "c", &Subject{Type: "row", ID: "1", Label: "a\tb"}}, ReasonInvalidRequest},
		{"bad utf-8", Identity{FormID: "f\xff", ControlID: "c"}, ReasonInvalidRequest},
		{"too long", Identity{FormID: long + "x", ControlID: "c"}, ReasonLimitExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.id.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Reason != tt.want || e.Message == "" {
				t.Fatalf("Validate = %v, want reason %q with a message", err, tt.want)
			}
		})
	}
}

func TestIdentityString(t *testing.T) {
	if got := profile.String(); got != "profile/display-name" {
		t.Errorf("String = %q", got)
	}
	id := Identity{"orders", "qty", &Subject{Type: "row", ID: "7", Label: "Seven"}}
	if got := id.String(); got != "orders/qty[row:7]" {
		t.Errorf("String = %q", got)
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Reason: ReasonNotFound, Message: "no such control"}
	if got := e.Error(); got != "control: not_found: no such control" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Reason: ReasonDenied}).Error(); got != "control: denied" {
		t.Errorf("Error() = %q", got)
	}
}
