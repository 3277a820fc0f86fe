// Package store defines what assent keeps durably: principals and their
// tokens, sign-in links and web sessions, settings, the audit log, and the
// records of Runs and Flows. It holds only types and interfaces; the embedded
// default implementation is store/sqlite.
//
// Secrets never reach the store in clear: tokens, sign-in links and session
// cookies are stored as SHA-256 hashes, so a copy of the database cannot be
// used to act as anyone.
package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a record does not exist (or has been revoked,
// consumed or has expired, where the distinction must not leak).
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned when a record that must be unique already exists.
var ErrConflict = errors.New("store: conflict")

// Principal kinds.
const (
	KindHuman   = "human"
	KindAgent   = "agent"
	KindService = "service"
)

// Principal is who a request acts for.
type Principal struct {
	ID     string   `json:"id"`
	Kind   string   `json:"kind"` // human, agent or service
	Name   string   `json:"name"`
	Grants []string `json:"grants"`
	// Supervisors lists the ids of the people who oversee this principal's
	// Runs, screens, proposals and Flow instances.
	Supervisors []string  `json:"supervisors,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	Revoked     bool      `json:"revoked,omitempty"`
}

// Has reports whether p holds the grant named capability.
func (p Principal) Has(capability string) bool {
	for _, g := range p.Grants {
		if g == capability {
			return true
		}
	}
	return false
}

// Session is a signed-in person's web session.
type Session struct {
	PrincipalID string
	CSRF        string
	ExpiresAt   time.Time
}

// AuditRecord is one durable entry of the audit log: a command on a control,
// or another action a person or agent took. Values of redacted controls are
// never stored.
type AuditRecord struct {
	Seq         int64     `json:"seq"`
	Time        time.Time `json:"time"`
	PrincipalID string    `json:"principalId"`
	Source      string    `json:"source"`
	FormID      string    `json:"formId,omitempty"`
	ControlID   string    `json:"controlId,omitempty"`
	Subject     string    `json:"subject,omitempty"`
	Action      string    `json:"action"`
	OK          bool      `json:"ok"`
	Reason      string    `json:"reason,omitempty"`
	Detail      string    `json:"detail,omitempty"` // JSON; never a redacted value
}

// AuditFilter selects audit records. Zero fields match everything.
type AuditFilter struct {
	FormID      string
	PrincipalID string
	AfterSeq    int64
	Limit       int
}

// Principals keeps principals and their bearer tokens.
type Principals interface {
	// CreatePrincipal stores p with the SHA-256 hash of its token.
	CreatePrincipal(ctx context.Context, p Principal, tokenHash []byte) error
	// PrincipalByToken returns the unrevoked principal whose token hashes
	// to tokenHash, or ErrNotFound.
	PrincipalByToken(ctx context.Context, tokenHash []byte) (Principal, error)
	// Principal returns the principal with id (revoked ones included).
	Principal(ctx context.Context, id string) (Principal, error)
	// ListPrincipals returns every principal, oldest first.
	ListPrincipals(ctx context.Context) ([]Principal, error)
	// RevokePrincipal revokes id's tokens and sessions.
	RevokePrincipal(ctx context.Context, id string) error
}

// Sessions keeps one-time sign-in links and web sessions.
type Sessions interface {
	// CreateSignInLink stores a single-use link for principalID.
	CreateSignInLink(ctx context.Context, linkHash []byte, principalID string, expires time.Time) error
	// ConsumeSignInLink marks the link used and returns its principal; a
	// used, expired or unknown link gives ErrNotFound.
	ConsumeSignInLink(ctx context.Context, linkHash []byte, now time.Time) (string, error)
	// CreateSession stores a web session.
	CreateSession(ctx context.Context, cookieHash []byte, s Session) error
	// Session returns the live session for cookieHash, or ErrNotFound.
	Session(ctx context.Context, cookieHash []byte, now time.Time) (Session, error)
	// DeleteSession ends a session.
	DeleteSession(ctx context.Context, cookieHash []byte) error
}

// Settings keeps small named values (for example the server's first-start
// marker).
type Settings interface {
	Setting(ctx context.Context, name string) (string, error)
	SetSetting(ctx context.Context, name, value string) error
}

// Audit is the append-only audit log.
type Audit interface {
	AppendAudit(ctx context.Context, r AuditRecord) (int64, error)
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
}

// Store is everything the server needs from persistence.
type Store interface {
	Principals
	Sessions
	Settings
	Audit
	Runs
	// Kind names the backend ("sqlite").
	Kind() string
	Close() error
}
