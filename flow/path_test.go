package flow

import "testing"

// TestPathStackReusesSlots checks that an element pushed where an earlier
// one was popped renders as a fresh one would, whatever the earlier one
// held.
func TestPathStackReusesSlots(t *testing.T) {
	type op struct {
		key   string
		index int
		pop   bool
	}
	tests := []struct {
		name string
		ops  []op
		want string
	}{
		{"key after index", []op{{index: 3}, {pop: true}, {key: "id"}}, "id"},
		{"index after key", []op{{key: "transitions"}, {key: "id"}, {pop: true}, {index: 2}}, "transitions[2]"},
		{"empty key after index", []op{{key: "t"}, {index: 3}, {pop: true}, {key: ""}}, "t[0]"},
		{"same key again", []op{{key: "a"}, {key: "b"}, {pop: true}, {key: "b"}}, "a.b"},
		{"other key", []op{{key: "a"}, {key: "b"}, {pop: true}, {key: "c"}}, "a.c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p pathStack
			for _, o := range tt.ops {
				switch {
				case o.pop:
					p.pop()
				case o.key != "" || o.index == 0:
					p.push(o.key)
				default:
					p.pushIndex(o.index)
				}
			}
			if got := p.String(); got != tt.want {
				t.Errorf("path = %q, want %q", got, tt.want)
			}
		})
	}
}
