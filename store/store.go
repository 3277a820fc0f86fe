// Package store defines what assent keeps durably: principals and their
// tokens, sign-in links and web sessions, settings, the audit log, command
// proposals, and the records of Runs and Flows. It holds types, interfaces
// and the rules every backend enforces (bounds, legal status moves), in pure
// Go; the embedded default implementation is store/sqlite, and
// store/storetest is the conformance suite a backend must pass.
//
// A Store hands out one store per part (Principals, Sessions, Settings,
// Audit, Proposals, Runs, Flows, ControlRegistry, Screens). A backend may
// implement them on one type or on several.
//
// Secrets never reach the store in clear: tokens, sign-in links and session
// cookies are stored as SHA-256 hashes, so a copy of the database cannot be
// used to act as anyone.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/assent-run/assent/flow"
)

// ErrNotFound is returned when a record does not exist (or has been revoked,
// consumed or has expired, where the distinction must not leak).
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned when a record that must be unique already exists,
// or when a conditional change finds the record in another state.
var ErrConflict = errors.New("store: conflict")

// ErrInvalid is returned, wrapped with the rule that was broken, when a
// write breaks a rule of the model (an unknown principal kind, an illegal
// status move). Nothing was written.
var ErrInvalid = errors.New("store: invalid")

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
	CreatedAt   time.Time `json:"created_at"`
	Revoked     bool      `json:"revoked,omitempty"`
}

// Has reports whether p holds the grant named capability.
func (p Principal) Has(capability string) bool {
	return slices.Contains(p.Grants, capability)
}

// ValidKind reports whether kind is one of KindHuman, KindAgent and
// KindService.
func ValidKind(kind string) bool {
	return kind == KindHuman || kind == KindAgent || kind == KindService
}

// Check reports whether p may be stored: it needs an id and a valid kind.
// The error wraps ErrInvalid.
func (p Principal) Check() error {
	if p.ID == "" {
		return fmt.Errorf("%w: a principal needs an id", ErrInvalid)
	}
	if !ValidKind(p.Kind) {
		return fmt.Errorf("%w: principal kind %q is not one of human, agent, service", ErrInvalid, p.Kind)
	}
	return nil
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

// AuditListMax is the most records one ListAudit call returns.
const AuditListMax = 1000

// AuditFilter selects audit records. Zero fields match everything.
type AuditFilter struct {
	FormID      string
	PrincipalID string
	// AfterSeq selects the records after this sequence number.
	AfterSeq int64
	// Limit is the most records to return: AuditListMax when it is not
	// positive or larger.
	Limit int
}

// Max returns the number of records a list with f returns at most: f.Limit
// bounded by AuditListMax.
func (f AuditFilter) Max() int {
	if f.Limit <= 0 || f.Limit > AuditListMax {
		return AuditListMax
	}
	return f.Limit
}

// Principals keeps principals and their bearer tokens.
type Principals interface {
	// CreatePrincipal stores p with the SHA-256 hash of its token (none
	// when tokenHash is nil). An existing id gives ErrConflict; a p that
	// fails Check gives ErrInvalid.
	CreatePrincipal(ctx context.Context, p Principal, tokenHash []byte) error
	// PrincipalByToken returns the unrevoked principal whose token hashes
	// to tokenHash, or ErrNotFound.
	PrincipalByToken(ctx context.Context, tokenHash []byte) (Principal, error)
	// Principal returns the principal with id (revoked ones included),
	// or ErrNotFound.
	Principal(ctx context.Context, id string) (Principal, error)
	// ListPrincipals returns every principal, oldest first.
	ListPrincipals(ctx context.Context) ([]Principal, error)
	// RevokePrincipal revokes id's tokens and ends its sessions and
	// unused sign-in links. An unknown or already revoked id gives
	// ErrNotFound.
	RevokePrincipal(ctx context.Context, id string) error
}

// Sessions keeps one-time sign-in links and web sessions.
type Sessions interface {
	// CreateSignInLink stores a single-use link for principalID.
	CreateSignInLink(ctx context.Context, linkHash []byte, principalID string, expires time.Time) error
	// ConsumeSignInLink marks the link used and returns its principal. A
	// used or unknown link, one that has expired at now (now is not before
	// its expiry), or one of a revoked principal gives ErrNotFound. Of
	// concurrent uses of one link exactly one succeeds.
	ConsumeSignInLink(ctx context.Context, linkHash []byte, now time.Time) (string, error)
	// CreateSession stores a web session.
	CreateSession(ctx context.Context, cookieHash []byte, s Session) error
	// Session returns the session for cookieHash when it has not expired
	// at now and its principal is not revoked, or ErrNotFound.
	Session(ctx context.Context, cookieHash []byte, now time.Time) (Session, error)
	// DeleteSession ends a session; an unknown one is not an error.
	DeleteSession(ctx context.Context, cookieHash []byte) error
}

// Settings keeps small named values (for example the server's first-start
// marker).
type Settings interface {
	// Setting returns the value of name, or ErrNotFound.
	Setting(ctx context.Context, name string) (string, error)
	// SetSetting stores value under name, replacing any earlier value.
	SetSetting(ctx context.Context, name, value string) error
}

// Audit is the append-only audit log.
type Audit interface {
	// AppendAudit stores r and returns its sequence number, greater than
	// that of every record appended before it. r.Seq is ignored.
	AppendAudit(ctx context.Context, r AuditRecord) (int64, error)
	// ListAudit returns the records f selects in sequence order, at most
	// f.Max().
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
}

// Store is everything assent keeps, one store per part. A Store is safe for
// concurrent use, and so is each part it returns.
type Store interface {
	Principals() Principals
	Sessions() Sessions
	Settings() Settings
	Audit() Audit
	Proposals() Proposals
	Runs() Runs
	// Flows returns the store of the Flow kernel.
	Flows() flow.Store
	// ControlRegistry returns the store of the control registry's
	// proposals, undo histories and hosted forms.
	ControlRegistry() Controls
	// Screens returns the store of the screens shown to people.
	Screens() Screens
	// Cluster returns what nodes sharing the store coordinate through.
	Cluster() Cluster
	// OAuth returns the store of the OAuth authorization server.
	OAuth() OAuth
	// Notify returns the outbox of notifications and the outgoing
	// webhooks.
	Notify() Notify
	// Rules returns the standing rules people give agents.
	Rules() Rules
	// Asks returns agents' questions to people.
	Asks() Asks
	// Groups returns the people's groups that decisions are routed to.
	Groups() Groups
	// Deadlines returns the deadlines of decisions waiting for people.
	Deadlines() Deadlines
	// Kind names the backend ("sqlite").
	Kind() string
	// Shared reports whether several nodes may serve from the store at
	// once, so that each must learn of the others' changes through the
	// store's event log (see [Cluster.EventLog]).
	Shared() bool
	// Close releases the backend; the parts must not be used after it.
	Close() error
}
