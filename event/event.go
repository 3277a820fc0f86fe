// Package event is assent's in-process event bus.
//
// Every event gets a sequence number, increasing by one per event. The bus
// keeps the newest events in a bounded replay buffer, so a subscriber that
// reconnects with the last sequence it saw receives exactly what it missed,
// without gaps or duplicates, as long as that is still in the buffer.
//
// Each subscriber has a bounded queue. Publishing never blocks: when a
// subscriber's queue is full, the events it cannot take are dropped for it
// alone and, once it catches up, it receives one "lagged" event saying how
// many it missed and from which sequence to resynchronise. Other subscribers
// are unaffected.
//
// A bus serves one process. Several processes (nodes) share their events
// through a Log, a shared log that numbers every node's events in one
// sequence: a bus opened on it (Open) appends what is published to the log
// and delivers what any node appended, in the log's order, so a client
// resumes by sequence number on any node.
package event

import (
	"encoding/json"
	"time"
)

// Lagged is the type of the event a subscriber receives after it fell
// behind and lost events.
const Lagged = "lagged"

// Event is one message on the bus.
//
// Who may see an event is decided when it is published: an event with no
// Owner, Audience or People is everyone's; otherwise it reaches its Owner,
// the principals its Audience lists and, when People is set, every person.
type Event struct {
	Seq  int64     `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// Owner, when set, is the principal the event is about; it always
	// sees the event.
	Owner string `json:"-"`
	// Audience lists the other principals who may see the event, for
	// example the people who supervise its Owner. The publisher resolves
	// it once, so delivery never looks anyone up.
	Audience []string `json:"-"`
	// People, when set, makes the event visible to every person (human
	// principal) as well.
	People bool            `json:"-"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// VisibleTo reports whether the principal id, a person when human is set,
// may see e.
func (e Event) VisibleTo(id string, human bool) bool {
	if e.Owner == "" && e.Audience == nil && !e.People {
		return true
	}
	if id == "" {
		return false
	}
	if id == e.Owner || e.People && human {
		return true
	}
	for _, a := range e.Audience {
		if a == id {
			return true
		}
	}
	return false
}

// LaggedData is the payload of a Lagged event.
type LaggedData struct {
	// Missed is how many events were dropped.
	Missed int64 `json:"missed"`
	// ResumeAfter is the last sequence delivered before the gap; a client
	// can resubscribe after it to fetch what is still in the replay buffer,
	// or reload its state.
	ResumeAfter int64 `json:"resume_after"`
}
