package notify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of a signed webhook (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// ErrBadSecret is returned for a secret that is not "whsec_" followed by
// base64 of at least 24 bytes.
var ErrBadSecret = errors.New("notify: a webhook secret is whsec_ followed by base64 of at least 24 bytes")

// ErrBadSignature is returned by Verify when no signature matches.
var ErrBadSignature = errors.New("notify: no webhook signature matches")

// ErrStale is returned by Verify when the timestamp is too far from now.
var ErrStale = errors.New("notify: webhook timestamp is too old or in the future")

// NewSecret returns a fresh random secret of 32 bytes.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the key of secret, which is "whsec_" and base64.
func ParseSecret(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(secret), SecretPrefix)
	if !ok {
		return nil, ErrBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) < 24 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the webhook-signature value of a message: "v1," and the
// base64 HMAC-SHA256, under key, of "id.timestamp.body".
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SetHeaders sets the three headers of a signed webhook on h.
func SetHeaders(h http.Header, key []byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(key, id, ts, body))
	h.Set("Content-Type", "application/json")
}

// Tolerance is how far a webhook's timestamp may be from the receiver's
// clock for Verify to accept it.
const Tolerance = 5 * time.Minute

// Verify checks a received webhook's headers against body and key, as a
// receiver does: the timestamp is within Tolerance of now and one of the
// space-separated signatures is the v1 signature of the message. It returns
// the message id, by which the receiver drops duplicates.
func Verify(key []byte, h http.Header, body []byte, now time.Time) (string, error) {
	id := h.Get(HeaderID)
	if id == "" {
		return "", fmt.Errorf("notify: missing %s header", HeaderID)
	}
	sec, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return "", fmt.Errorf("notify: bad %s header", HeaderTimestamp)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > Tolerance || d < -Tolerance {
		return "", ErrStale
	}
	want := []byte(Sign(key, id, ts, body))
	for _, sig := range strings.Fields(h.Get(HeaderSignature)) {
		if hmac.Equal([]byte(sig), want) {
			return id, nil
		}
	}
	return "", ErrBadSignature
}

// Payload is the JSON body of a webhook. Text makes it a message a
// Slack-compatible incoming webhook posts as it is.
type Payload struct {
	Type      string      `json:"type"`
	ID        string      `json:"id"`
	Timestamp time.Time   `json:"timestamp"`
	Text      string      `json:"text"`
	Data      PayloadData `json:"data"`
}

// PayloadData is what a webhook says about its item.
type PayloadData struct {
	Kind    string    `json:"kind"`
	ItemID  string    `json:"item_id"`
	Title   string    `json:"title"`
	Summary string    `json:"summary"`
	Agent   string    `json:"agent,omitempty"`
	For     []string  `json:"for,omitempty"`
	URL     string    `json:"url"`
	Created time.Time `json:"created_at"`
	// Group is the group the decision is routed to, when it names one.
	Group string `json:"group,omitempty"`
	// Deadline is when the decision ends without a person, when it has
	// a deadline.
	Deadline time.Time `json:"deadline,omitzero"`
}

// WebhookBody returns the body of the webhook with message id msgID about
// it, sent at now.
func WebhookBody(msgID string, it Item, now time.Time) ([]byte, error) {
	text := it.Title
	if it.URL != "" {
		text += " <" + it.URL + "|Open the card>"
	}
	if it.Summary != "" {
		text += "\n" + it.Summary
	}
	typ := "decision.pending"
	if it.Kind == KindDecisionEscalated {
		typ = KindDecisionEscalated
	}
	dl := it.Deadline
	if !dl.IsZero() {
		dl = dl.UTC()
	}
	return json.Marshal(Payload{
		Type: typ, ID: msgID, Timestamp: now.UTC(), Text: text,
		Data: PayloadData{Kind: it.Kind, ItemID: it.ID, Title: it.Title, Summary: it.Summary,
			Agent: it.Agent, For: it.For, URL: it.URL, Created: it.CreatedAt.UTC(), Group: it.Group, Deadline: dl},
	})
}
