package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Statuses of an outbox message.
const (
	// MessagePending waits for (another) delivery attempt.
	MessagePending = "pending"
	// MessageDelivered was accepted by its destination.
	MessageDelivered = "delivered"
	// MessageDead failed every attempt; a person may replay it.
	MessageDead = "dead"
)

// OutboxMessage is one notification to one destination, kept until it is
// delivered or dead. Its ID is stable across attempts, so that a receiver
// drops duplicates of an at-least-once delivery.
type OutboxMessage struct {
	ID string `json:"id"`
	// Channel names the destination: "webhook:<id>" or "mail:<principal id>".
	Channel string `json:"channel"`
	// Item is the key of the item the message announces (kind:id).
	Item string `json:"item"`
	// Payload is what the channel sends, as JSON, opaque to the store.
	Payload json.RawMessage `json:"payload"`
	Status  string          `json:"status"`
	// Attempts counts the delivery attempts made so far.
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// NextAt is when the next attempt is due.
	NextAt      time.Time `json:"next_at"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
}

// Check reports whether m may be enqueued. The error wraps ErrInvalid.
func (m OutboxMessage) Check() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: a message needs an id", ErrInvalid)
	case m.Channel == "":
		return fmt.Errorf("%w: message %s needs a channel", ErrInvalid, m.ID)
	case len(m.Payload) == 0 || !json.Valid(m.Payload):
		return fmt.Errorf("%w: message %s needs a JSON payload", ErrInvalid, m.ID)
	}
	return nil
}

// Attempt is the outcome of one delivery attempt of a claimed message.
type Attempt struct {
	ID string
	// Node is the node that claimed the message; a node whose lease
	// another took over changes nothing (ErrConflict).
	Node string
	// Delivered reports success (Error may then note why nothing was
	// sent: the item was decided first); otherwise Error says why and
	// Retry says when to try again, or, when zero, that the message is
	// dead.
	Delivered bool
	Error     string
	Retry     time.Time
	At        time.Time
}

// Webhook is an outgoing webhook: where to post and the secret it signs
// with ("whsec_" and base64). The secret is kept because signing needs it;
// it never leaves the server in a listing.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Secret    string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// OutboxListMax is the most messages one ListMessages call returns.
const OutboxListMax = 500

// Notify keeps the outbox of notifications and the outgoing webhooks.
//
// Delivery is at least once and by one node at a time: ClaimMessages leases
// due messages to a node, so that nodes sharing the store never hold the
// same message at once, and a message whose node died is claimed again when
// its lease ends.
type Notify interface {
	// EnqueueMessages stores each message as pending, due at its NextAt;
	// a message whose id is stored already is left as it is. It returns
	// how many it stored.
	EnqueueMessages(ctx context.Context, ms []OutboxMessage) (int, error)
	// ClaimMessages leases to node, until now+lease, at most limit
	// pending messages due at now whose lease (if any) has ended, oldest
	// due first, and counts the attempt.
	ClaimMessages(ctx context.Context, node string, now time.Time, lease time.Duration, limit int) ([]OutboxMessage, error)
	// FinishAttempt records a claimed message's attempt and ends its
	// lease: delivered, pending again at a.Retry, or dead. A message not
	// leased to a.Node gives ErrConflict; an unknown one ErrNotFound.
	FinishAttempt(ctx context.Context, a Attempt) error
	// ReleaseMessages ends every lease node holds, so that a node that
	// restarts delivers at once what it held when it stopped.
	ReleaseMessages(ctx context.Context, node string) error
	// ListMessages returns the messages with status (every one when
	// empty), newest first, at most limit (OutboxListMax when not
	// positive or larger).
	ListMessages(ctx context.Context, status string, limit int) ([]OutboxMessage, error)
	// ReplayMessage makes a dead message pending, due at now, with its
	// attempts reset. A message that is not dead gives ErrConflict.
	ReplayMessage(ctx context.Context, id string, now time.Time) error

	// AddWebhook stores w; an existing id gives ErrConflict.
	AddWebhook(ctx context.Context, w Webhook) error
	// Webhooks returns every webhook, oldest first, with its secret.
	Webhooks(ctx context.Context) ([]Webhook, error)
	// RemoveWebhook removes the webhook id, or gives ErrNotFound.
	RemoveWebhook(ctx context.Context, id string) error
}
