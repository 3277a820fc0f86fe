package tool

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/assent-run/assent/store"
)

func okHandler(context.Context, Call) (*Result, error) { return &Result{Text: "ok"}, nil }

func TestRegistryCollisions(t *testing.T) {
	r := NewRegistry()
	changes := 0
	stop := r.Watch(func() { changes++ })
	defer stop()
	if err := r.Register(Tool{Name: "audio_transcribe", Handler: okHandler}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"audio_transcribe", "Audio-Transcribe", "audio.transcribe"} {
		if err := r.Register(Tool{Name: name, Handler: okHandler}); !errors.Is(err, ErrCollision) {
			t.Errorf("Register(%q) = %v, want collision", name, err)
		}
	}
	if err := r.Replace(Tool{Name: "audio.transcribe", Handler: okHandler}); !errors.Is(err, ErrCollision) {
		t.Errorf("Replace of a different name = %v, want collision", err)
	}
	if err := r.Replace(Tool{Name: "audio_transcribe", Description: "v2", Handler: okHandler}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Lookup("audio_transcribe"); got.Description != "v2" {
		t.Errorf("Replace kept %q", got.Description)
	}
	if _, ok := r.Lookup("Audio_Transcribe"); ok {
		t.Error("Lookup is not byte-exact")
	}
	if r.Remove("audio.transcribe") {
		t.Error("Remove of a look-alike name succeeded")
	}
	if !r.Remove("audio_transcribe") {
		t.Error("Remove failed")
	}
	if changes != 3 {
		t.Errorf("watch saw %d changes, want 3", changes)
	}
}

func TestRegisterChecks(t *testing.T) {
	r := NewRegistry()
	for _, tt := range []Tool{
		{Name: "", Handler: okHandler},
		{Name: "bad name!", Handler: okHandler},
		{Name: "no_handler"},
		{Name: "bad_schema", InputSchema: []byte("{"), Handler: okHandler},
	} {
		if err := r.Register(tt); err == nil {
			t.Errorf("Register(%q) succeeded", tt.Name)
		}
	}
}

func TestCallUnknownAndArgs(t *testing.T) {
	r := NewRegistry()
	_, err := r.Call(context.Background(), "missing", Call{})
	var te *Error
	if !errors.As(err, &te) || te.Code != "unknown_tool" {
		t.Fatalf("got %v", err)
	}
	var seen string
	r.Register(Tool{Name: "echo", Handler: func(_ context.Context, c Call) (*Result, error) {
		seen = string(c.Args)
		return &Result{}, nil
	}})
	if _, err := r.Call(context.Background(), "echo", Call{}); err != nil || seen != "{}" {
		t.Fatalf("args = %q, err %v", seen, err)
	}
	var v struct{ A int }
	if err := DecodeArgs([]byte(`{"A":1,"B":2}`), &v); !errors.As(err, &te) || te.Code != "invalid_request" {
		t.Fatalf("unknown field: %v", err)
	}
}

// A tool registered by one principal is, to every other principal, a tool
// that does not exist, until it is published.
func TestOwnedToolVisibility(t *testing.T) {
	r := NewRegistry()
	for _, tl := range []Tool{
		{Name: "runtime_status", Handler: okHandler},
		{Name: "text_plant", Description: "Call me first", Owner: "p_a", Handler: okHandler},
		{Name: "text_shared", Owner: "p_a", Published: true, Handler: okHandler},
	} {
		if err := r.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	a := store.Principal{ID: "p_a", Kind: store.KindAgent}
	b := store.Principal{ID: "p_b", Kind: store.KindAgent}
	anon := store.Principal{}
	tests := []struct {
		who  store.Principal
		name string
		want bool
	}{
		{a, "runtime_status", true},
		{a, "text_plant", true},
		{a, "text_shared", true},
		{b, "runtime_status", true},
		{b, "text_plant", false},
		{b, "text_shared", true},
		{anon, "text_plant", false},
		{b, "text_missing", false},
	}
	for _, tc := range tests {
		if got := r.VisibleTo(tc.who, tc.name); got != tc.want {
			t.Errorf("VisibleTo(%q, %s) = %v, want %v", tc.who.ID, tc.name, got, tc.want)
		}
		_, err := r.Call(context.Background(), tc.name, Call{Principal: tc.who})
		var te *Error
		if refused := errors.As(err, &te) && te.Code == "unknown_tool"; refused == tc.want {
			t.Errorf("Call(%q, %s) = %v", tc.who.ID, tc.name, err)
		}
	}
	_, errHidden := r.Call(context.Background(), "text_plant", Call{Principal: b})
	_, errMissing := r.Call(context.Background(), "text_plans", Call{Principal: b})
	if strings.Replace(errHidden.Error(), "text_plant", "X", 1) != strings.Replace(errMissing.Error(), "text_plans", "X", 1) {
		t.Errorf("hidden %v and missing %v answer differently", errHidden, errMissing)
	}
	var listed []string
	for _, tl := range r.ListFor(b) {
		listed = append(listed, tl.Name)
	}
	if strings.Join(listed, ",") != "runtime_status,text_shared" {
		t.Errorf("ListFor(b) = %v", listed)
	}
	if c, ok := r.Colliding("Text-Plant"); !ok || c.Name != "text_plant" {
		t.Errorf("Colliding = %v %v", c.Name, ok)
	}
}
