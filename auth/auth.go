// Package auth answers "who is asking": it mints and hashes bearer tokens,
// sign-in links and session cookies, and carries the authenticated principal
// in a request's context.
//
// Secrets are random 256-bit values encoded as URL-safe base64 with a short
// prefix naming their use (for example "asnt_" for bearer tokens). Only their
// SHA-256 hash is ever stored, so the store cannot be used to act as anyone.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/assent-run/assent/store"
)

// Prefixes of the secrets assent mints. They make a leaked secret easy to
// recognise and say what it is for.
const (
	TokenPrefix   = "asnt_" // bearer tokens for agents, services and people
	SignInPrefix  = "asgn_" // one-time sign-in links
	SessionPrefix = "ases_" // web session cookies

	AccessTokenPrefix  = "asat_" // OAuth access tokens
	RefreshTokenPrefix = "asrt_" // OAuth refresh tokens
	AuthCodePrefix     = "asac_" // OAuth authorization codes
)

// NewSecret returns prefix followed by 256 random bits in URL-safe base64.
func NewSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics on an unusable source)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Hash returns the SHA-256 of secret, the form in which it is stored.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewID returns a random identifier with the given prefix, such as "p_…".
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p store.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal carried by ctx.
func PrincipalFrom(ctx context.Context) (store.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(store.Principal)
	return p, ok
}
