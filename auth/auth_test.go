package auth

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/assent-run/assent/store"
)

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(TokenPrefix), NewSecret(TokenPrefix)
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, TokenPrefix) {
		t.Fatalf("secret %q lacks prefix", a)
	}
	// 32 bytes of randomness → 43 base64 characters.
	if got := len(a) - len(TokenPrefix); got != 43 {
		t.Fatalf("secret body has %d characters, want 43", got)
	}
	if bytes.Equal(Hash(a), Hash(b)) {
		t.Fatal("hashes of different secrets are equal")
	}
	if !bytes.Equal(Hash(a), Hash(a)) {
		t.Fatal("hash is not deterministic")
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := PrincipalFrom(context.Background()); ok {
		t.Fatal("empty context has a principal")
	}
	p := store.Principal{ID: "p_1", Kind: store.KindAgent}
	got, ok := PrincipalFrom(WithPrincipal(context.Background(), p))
	if !ok || got.ID != "p_1" {
		t.Fatalf("got %+v, %v", got, ok)
	}
}
