package store

import (
	"context"
	"fmt"
	"time"

	"github.com/assent-run/assent/event"
)

// Lease is a node's claim to supervise a Run. At most one node holds the
// lease of a Run at a time. A lease stays its holder's until the holder
// releases it or, once it has expired, another node acquires it: a holder
// that renews late keeps its lease if nobody took it meanwhile.
//
// Expiry is decided with the times the nodes pass in, so the nodes' clocks
// must agree to well within the lease's time to live.
type Lease struct {
	RunID string
	// Node names the holder.
	Node string
	// AcquiredAt is when Node acquired the lease; renewals keep it.
	AcquiredAt time.Time
	// ExpiresAt is when the lease expires unless renewed: it has expired
	// at a time not before ExpiresAt.
	ExpiresAt time.Time
	// PreviousNode is set on the lease AcquireLease returns when it took
	// over another node's expired lease: that node, whose lease expired at
	// PreviousExpiresAt. It is not stored.
	PreviousNode      string
	PreviousExpiresAt time.Time
}

// Expired reports whether l has expired at now.
func (l Lease) Expired(now time.Time) bool { return !now.Before(l.ExpiresAt) }

// LeaseMaxTTL bounds the time to live of a lease.
const LeaseMaxTTL = 24 * time.Hour

// Cluster is what several nodes sharing one store coordinate through: the
// leases by which exactly one node supervises each Run, and the log that
// gives every node's events one global order.
//
// Each write runs in one transaction of the backend, so of concurrent
// acquisitions of one Run's lease exactly one succeeds, on any node.
type Cluster interface {
	// AcquireLease makes node the holder of runID's lease until now+ttl.
	// It succeeds when the Run has no lease, when node holds it already
	// (the lease is then renewed) or when the lease expired at now (the
	// returned lease names the node it was taken from). When another node
	// holds an unexpired lease it returns that lease and ErrConflict. An
	// empty runID or node, or a ttl not in (0, LeaseMaxTTL], gives
	// ErrInvalid.
	AcquireLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (Lease, error)
	// RenewLease extends node's lease of runID to now+ttl. A Run without
	// a lease gives ErrNotFound; one whose lease another node holds gives
	// ErrConflict and that lease.
	RenewLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (Lease, error)
	// RenewLeases extends every lease node holds to now+ttl and returns
	// them by Run id: a node renews all its leases in one call.
	RenewLeases(ctx context.Context, node string, now time.Time, ttl time.Duration) ([]Lease, error)
	// ReleaseLease ends node's lease of runID. A Run without a lease
	// gives ErrNotFound; one whose lease another node holds ErrConflict.
	ReleaseLease(ctx context.Context, runID, node string) error
	// Lease returns runID's lease, or ErrNotFound.
	Lease(ctx context.Context, runID string) (Lease, error)
	// ExpiredLeases returns the leases expired at now, the longest
	// expired first (ties by Run id).
	ExpiredLeases(ctx context.Context, now time.Time) ([]Lease, error)

	// RestartRun stores rec as the next generation of Run rec.ID, whose
	// current generation lostInstance has ended, keeping the Run's Control
	// journal and Trace (and its creation time): a node restarting a lost
	// Run carries them over to the new generation. The caller first
	// settles the old generation's pending Controls, since a journal may
	// not hold pending records of another generation. A Run whose current
	// generation is not lostInstance gives ErrConflict; an unknown Run
	// ErrNotFound.
	RestartRun(ctx context.Context, rec RunRecord, lostInstance string) error

	// EventLog returns the log of events shared by every node on this
	// store. Buses opened on it (event.Open) deliver every node's events
	// in one order, numbered by the log.
	EventLog() event.Log
}

// CheckLeaseRequest reports whether a lease of runID for node with ttl may
// be asked for. The error wraps ErrInvalid.
func CheckLeaseRequest(runID, node string, ttl time.Duration) error {
	if runID == "" {
		return fmt.Errorf("%w: a lease needs a Run id", ErrInvalid)
	}
	return CheckLeaseHolder(node, ttl)
}

// CheckLeaseHolder reports whether node may hold leases with ttl. The
// error wraps ErrInvalid.
func CheckLeaseHolder(node string, ttl time.Duration) error {
	switch {
	case node == "":
		return fmt.Errorf("%w: a lease needs a node name", ErrInvalid)
	case ttl <= 0 || ttl > LeaseMaxTTL:
		return fmt.Errorf("%w: a lease's time to live must be positive and at most %s, not %s", ErrInvalid, LeaseMaxTTL, ttl)
	}
	return nil
}

// DecideAcquire is the rule of AcquireLease, for a backend to apply inside
// its transaction: cur is runID's lease and held whether there is one.
// It returns the lease to store or, with ErrConflict, the lease that
// stays.
func DecideAcquire(cur Lease, held bool, runID, node string, now time.Time, ttl time.Duration) (Lease, error) {
	if err := CheckLeaseRequest(runID, node, ttl); err != nil {
		return Lease{}, err
	}
	next := Lease{RunID: runID, Node: node, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
	switch {
	case !held:
	case cur.Node == node:
		next.AcquiredAt = cur.AcquiredAt
	case !cur.Expired(now):
		return cur, fmt.Errorf("%w: Run %s is supervised by node %s until %s; wait for its lease to expire", ErrConflict, runID, cur.Node, FormatTime(cur.ExpiresAt))
	default:
		next.PreviousNode, next.PreviousExpiresAt = cur.Node, cur.ExpiresAt
	}
	return next, nil
}

// DecideRenew is the rule of RenewLease: cur is runID's lease and held
// whether there is one.
func DecideRenew(cur Lease, held bool, runID, node string, now time.Time, ttl time.Duration) (Lease, error) {
	if err := CheckLeaseRequest(runID, node, ttl); err != nil {
		return Lease{}, err
	}
	switch {
	case !held:
		return Lease{}, fmt.Errorf("%w: Run %s has no lease to renew; acquire it", ErrNotFound, runID)
	case cur.Node != node:
		return cur, fmt.Errorf("%w: Run %s is supervised by node %s, not %s", ErrConflict, runID, cur.Node, node)
	}
	cur.ExpiresAt = now.Add(ttl)
	return cur, nil
}

// DecideRelease is the rule of ReleaseLease: cur is runID's lease and held
// whether there is one.
func DecideRelease(cur Lease, held bool, runID, node string) error {
	switch {
	case !held:
		return fmt.Errorf("%w: Run %s has no lease", ErrNotFound, runID)
	case cur.Node != node:
		return fmt.Errorf("%w: Run %s is supervised by node %s, not %s", ErrConflict, runID, cur.Node, node)
	}
	return nil
}
