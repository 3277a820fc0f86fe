package control

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
)

func TestValue(t *testing.T) {
	ctx := context.Background()
	v := NewValue("Ada")
	if got, err := v.Get(ctx); got != "Ada" || err != nil {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if err := v.Set(ctx, 42); err != nil || v.Load() != 42 {
		t.Fatalf("Set: %v, %v", err, v.Load())
	}
	if err := v.Clear(ctx); err != nil || v.Load() != nil {
		t.Fatalf("Clear: %v, %v", err, v.Load())
	}
	valid := false
	v.SetState(State{Disabled: true, Valid: &valid, ValidationMessage: "required"})
	valid = true // the holder keeps its own copy
	st, err := v.State(ctx)
	if err != nil || !st.Disabled || st.Valid == nil || *st.Valid || st.ValidationMessage != "required" {
		t.Fatalf("State = %+v, %v", st, err)
	}
	*st.Valid = true // and hands out copies
	if st2, _ := v.State(ctx); *st2.Valid {
		t.Error("State returned the holder's own pointer")
	}
}

func TestValueAsHostedControl(t *testing.T) {
	r := New(Config{})
	v := NewValue("Ada")
	mustRegister(t, r, Registration{Identity: profile, Metadata: text("Name"), Handles: v.Handles()})
	s, _ := r.Get(context.Background(), profile)
	want := []Capability{CapExplain, CapRead, CapStage, CapApply, CapUndo, CapClear, CapDiscard}
	if len(s.Metadata.Capabilities) != len(want) {
		t.Errorf("capabilities = %v, want %v", s.Metadata.Capabilities, want)
	}
	v.SetState(State{Readonly: true})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: profile, Value: "x"}, agent), ReasonNotEditable)
	v.SetState(State{})
	wantReason(t, exec(t, r, Command{Action: Clear, Identity: profile}, person), "")
	if v.Load() != nil {
		t.Errorf("cleared hosted value = %v", v.Load())
	}
}

func TestValueConcurrent(t *testing.T) {
	ctx := context.Background()
	v := NewValue(0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				_ = v.Set(ctx, i*1000+j)
				_, _ = v.Get(ctx)
				v.SetState(State{Disabled: j%2 == 0})
				_, _ = v.State(ctx)
			}
		})
	}
	wg.Wait()
	if _, ok := v.Load().(int); !ok {
		t.Errorf("value = %v", v.Load())
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{"a", "a", true},
		{"a", "b", false},
		{"1", 1, false},
		{1, 1.0, true},
		{int64(3), uint8(3), true},
		{json.Number("2.5"), 2.5, true},
		{json.Number("x"), 2.5, false},
		{true, true, true},
		{true, "true", false},
		{nil, "", false},
		{"", nil, false},
		{0, nil, false},
		{[]any{"a", 1}, []any{"a", 1.0}, true},
		{[]string{"a"}, []any{"a"}, true},
		{[]string{"a"}, []string{"b"}, false},
		{map[string]any{"x": 1, "y": "z"}, map[string]any{"y": "z", "x": 1.0}, true},
		{map[string]any{"x": 1}, map[string]any{"x": 2}, false},
		{[]any{1}, 1, false},
		{1, []any{1}, false},
		{"a", []any{"a"}, false},
		{[]any{"a"}, "a", false},
		{[]any{nil}, nil, false},
		{make(chan int), make(chan int), false}, // not JSON: compared by identity
	}
	for _, tt := range tests {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
