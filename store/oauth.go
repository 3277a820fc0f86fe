package store

import (
	"context"
	"encoding/json"
	"time"
)

// Kinds of OAuth grants: what a hashed secret handed to an OAuth client
// stands for.
const (
	OAuthCode    = "code"    // an authorization code, exchanged once for tokens
	OAuthAccess  = "access"  // a short-lived access token
	OAuthRefresh = "refresh" // a refresh token, exchanged once for new tokens
)

// OAuthClient is a client registered with assent's authorization server by
// dynamic client registration.
type OAuthClient struct {
	ID string
	// Metadata is the client's registered metadata (RFC 7591) as JSON.
	Metadata  json.RawMessage
	CreatedAt time.Time
}

// OAuthGrant is what an authorization code, access token or refresh token
// stands for. The grants of one authorization share PrincipalID, the agent
// principal the person's consent created; revoking that principal ends
// them all.
type OAuthGrant struct {
	Kind        string
	ClientID    string
	PrincipalID string
	// Data is what the grant binds as JSON (redirect URI, PKCE challenge,
	// resource), opaque to the store.
	Data      json.RawMessage
	ExpiresAt time.Time
}

// OAuth keeps the clients and grants of the authorization server. Secrets
// reach it only as SHA-256 hashes.
type OAuth interface {
	// CreateOAuthClient stores c; an existing id gives ErrConflict.
	CreateOAuthClient(ctx context.Context, c OAuthClient) error
	// OAuthClient returns the client with id, or ErrNotFound.
	OAuthClient(ctx context.Context, id string) (OAuthClient, error)
	// CreateOAuthGrant stores g under the hash of its secret.
	CreateOAuthGrant(ctx context.Context, hash []byte, g OAuthGrant) error
	// OAuthGrant returns the unused grant of kind whose secret hashes to
	// hash, when it has not expired at now and its principal is not
	// revoked; otherwise ErrNotFound.
	OAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (OAuthGrant, error)
	// UseOAuthGrant marks that grant used and returns it. A grant used
	// before is returned with ErrConflict, so that the caller can end the
	// authorization it belongs to; an unknown or expired grant, or one
	// of a revoked principal, gives ErrNotFound. Of concurrent uses of one
	// grant exactly one succeeds.
	UseOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time) (OAuthGrant, error)
	// ExchangeOAuthGrant marks that grant used and stores next in the
	// same transaction, so that a grant is never spent without its
	// successors nor its successors stored without it being spent. Its
	// answers are those of UseOAuthGrant; on any error nothing changes.
	ExchangeOAuthGrant(ctx context.Context, hash []byte, kind string, now time.Time, next []NewOAuthGrant) (OAuthGrant, error)
	// PruneOAuth clears what was started and never finished. It deletes
	// the clients registered before stale that no grant names, and
	// returns the unrevoked principals (at most 100) whose every grant is
	// an authorization code that expired unexchanged by now: a person
	// consented and the client never came back. The caller revokes them.
	PruneOAuth(ctx context.Context, now, stale time.Time) ([]string, error)
}

// NewOAuthGrant is a grant to store under the hash of its secret.
type NewOAuthGrant struct {
	Hash  []byte
	Grant OAuthGrant
}
