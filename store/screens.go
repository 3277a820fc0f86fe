package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Bounds of the screens part. A backend enforces them inside the
// transaction that writes, so concurrent writers cannot overshoot.
const (
	// ScreensPerOwner is the most screens one principal keeps; creating
	// one more deletes the owner's oldest.
	ScreensPerOwner = 100
	// ScreenPendingLimit is the most presses that may wait for a person's
	// confirmation on one screen.
	ScreenPendingLimit = 16
	// ScreenUpdatesKept is how many live-feed updates a screen keeps; the
	// oldest are dropped, their sequence numbers are never reused.
	ScreenUpdatesKept = 256
	// IdempotencyKeysKept is the most idempotency keys kept; the oldest
	// is forgotten first.
	IdempotencyKeysKept = 10_000
)

// Screen is a screen shown to a person: the stream it was drawn from, its
// version and the person's state, as the server encodes it.
type Screen struct {
	ID      string `json:"id"`
	OwnerID string `json:"ownerId"`
	// Document is the screen's source, from which the server draws it
	// again.
	Document string `json:"document"`
	// Version grows with every saved change of the screen.
	Version int64 `json:"version"`
	// State is the person's field state and the screen's options (JSON).
	State json.RawMessage `json:"state,omitempty"`
	// LastSeq is the sequence number of the newest live-feed update, 0
	// before the first. It is set by AppendScreenUpdate only.
	LastSeq   int64     `json:"lastSeq"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// SameDocument, in UpdateScreen, says Document is the document stored
	// already, so that a save of a large screen's state does not write its
	// document again. Reads leave it unset.
	SameDocument bool `json:"-"`
}

// Check reports whether sc may be stored: it needs an id and an owner. The
// error wraps ErrInvalid.
func (sc Screen) Check() error {
	switch {
	case sc.ID == "":
		return fmt.Errorf("%w: a screen needs an id", ErrInvalid)
	case sc.OwnerID == "":
		return fmt.Errorf("%w: screen %s needs an owner", ErrInvalid, sc.ID)
	case sc.State != nil && !json.Valid(sc.State):
		return fmt.Errorf("%w: the state of screen %s is not JSON", ErrInvalid, sc.ID)
	}
	return nil
}

// ScreenPending is a press of a governed button that waits for the person's
// confirmation.
type ScreenPending struct {
	ScreenID string `json:"screenId"`
	// ID names the press within its screen.
	ID     string `json:"id"`
	Button string `json:"button"`
	Tool   string `json:"tool"`
	// Params are the tool's parameters as the server encodes them (JSON);
	// secret ones are left out.
	Params json.RawMessage `json:"params,omitempty"`
	// Sentence is what the person confirms, in the application's words.
	Sentence  string    `json:"sentence,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// ScreenVersion is the version of the screen when the press was
	// taken. Only TakeScreenPending sets it, read in the transaction that
	// takes the press, so a node can tell whether its copy of the screen
	// is current without reading the screen again.
	ScreenVersion int64 `json:"screenVersion,omitempty"`
}

// ScreenUpdate is one update of a screen's live feed.
type ScreenUpdate struct {
	Seq  int64  `json:"seq"`
	Text string `json:"text"`
}

// LoadedScreen is a screen with everything of its own, read in one
// transaction: the record, the presses waiting on it (oldest first) and the
// kept updates of its live feed (in order).
type LoadedScreen struct {
	Screen  Screen
	Pending []ScreenPending
	Updates []ScreenUpdate
}

// Idempotency is an idempotency key with the answer it gave, kept so that
// a retried request gets the same answer.
type Idempotency struct {
	Key string
	// Fingerprint identifies the request the key was first used with.
	Fingerprint []byte
	// Done is false while the first request is being answered.
	Done      bool
	Status    int
	Body      []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Screens keeps screens, their pending confirmations and live feeds, and
// the idempotency keys of the requests that change them.
type Screens interface {
	// CreateScreen stores sc (LastSeq is ignored). When its owner then
	// holds more than ScreensPerOwner screens, the oldest are deleted
	// with everything of theirs, in the same transaction, and their ids
	// returned. An existing id gives ErrConflict, a sc that fails Check
	// ErrInvalid.
	CreateScreen(ctx context.Context, sc Screen) (evicted []string, err error)
	// UpdateScreen replaces the document (unless sc.SameDocument),
	// version, state and update time of screen sc.ID when the stored version is still prev and sc.Version
	// is greater: the version is compared and set in one transaction, so of
	// writers that read the same version exactly one succeeds. Otherwise it
	// returns ErrConflict (another writer saved the screen since prev was
	// read; read it again). An unknown id gives ErrNotFound.
	UpdateScreen(ctx context.Context, sc Screen, prev int64) error
	// Screen returns the screen id, or ErrNotFound.
	Screen(ctx context.Context, id string) (Screen, error)
	// LoadScreen returns the screen id with its pending presses and its
	// kept live feed, read in one transaction so they agree with one
	// another; an unknown id gives ErrNotFound.
	LoadScreen(ctx context.Context, id string) (LoadedScreen, error)
	// ListScreens returns the screens of ownerID (every one when empty),
	// oldest first.
	ListScreens(ctx context.Context, ownerID string) ([]Screen, error)
	// ScreenIDs returns the ids of every saved screen, oldest first,
	// without reading the screens themselves.
	ScreenIDs(ctx context.Context) ([]string, error)
	// DeleteScreen deletes a screen with its pending confirmations and
	// live feed; an unknown id gives ErrNotFound.
	DeleteScreen(ctx context.Context, id string) error

	// AddScreenPending stores a press waiting for confirmation. An unknown
	// screen gives ErrNotFound, an existing press id ErrConflict, and a
	// screen that has ScreenPendingLimit presses waiting ErrInvalid.
	AddScreenPending(ctx context.Context, p ScreenPending) error
	// TakeScreenPending removes and returns the press id of screenID, or
	// ErrNotFound: of concurrent takes exactly one gets it. The press
	// returned carries the screen's version (ScreenVersion).
	TakeScreenPending(ctx context.Context, screenID, id string) (ScreenPending, error)
	// ListScreenPending returns the presses waiting on screenID, oldest
	// first.
	ListScreenPending(ctx context.Context, screenID string) ([]ScreenPending, error)

	// AppendScreenUpdate adds text to the live feed of screenID and
	// returns its sequence number, one more than the screen's LastSeq;
	// only the newest ScreenUpdatesKept updates are kept. An unknown
	// screen gives ErrNotFound.
	AppendScreenUpdate(ctx context.Context, screenID, text string) (int64, error)
	// ScreenUpdates returns the kept updates of screenID after afterSeq,
	// in order.
	ScreenUpdates(ctx context.Context, screenID string, afterSeq int64) ([]ScreenUpdate, error)

	// BeginIdempotent looks key up at now. When it is unknown or expired
	// it stores rec (not done) and returns it with created true;
	// otherwise it returns the stored record and false, and the caller
	// compares fingerprints. Expired keys are deleted, and only the newest
	// IdempotencyKeysKept are kept.
	BeginIdempotent(ctx context.Context, rec Idempotency, now time.Time) (Idempotency, bool, error)
	// FinishIdempotent records the answer of key and marks it done; an
	// unknown key gives ErrNotFound.
	FinishIdempotent(ctx context.Context, key string, status int, body []byte) error
	// ForgetIdempotent deletes key, so a retry runs again; an unknown key
	// is not an error.
	ForgetIdempotent(ctx context.Context, key string) error
}
