package notify

import (
	"fmt"
	"time"
)

// Quiet is a person's quiet hours: every day from Start to End, in the
// person's time zone, their messages are held and sent when End comes.
// A window whose End is not after its Start runs past midnight (22:00 to
// 07:00); Start equal to End holds nothing.
type Quiet struct {
	// Start and End are minutes after local midnight, 0 to 1439.
	Start, End int
	// Zone is an IANA time zone name ("Europe/Berlin", "UTC").
	Zone string

	loc *time.Location
}

// ParseQuiet reads quiet hours given as "HH:MM" local times and a time
// zone name.
func ParseQuiet(start, end, zone string) (Quiet, error) {
	s, err := parseClock(start)
	if err != nil {
		return Quiet{}, fmt.Errorf("start: %w", err)
	}
	e, err := parseClock(end)
	if err != nil {
		return Quiet{}, fmt.Errorf("end: %w", err)
	}
	if zone == "" || len(zone) > 64 {
		return Quiet{}, fmt.Errorf("time zone %q: give an IANA name like Europe/Berlin or UTC", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return Quiet{}, fmt.Errorf("time zone %q is not known: give an IANA name like Europe/Berlin or UTC", zone)
	}
	return Quiet{Start: s, End: e, Zone: zone, loc: loc}, nil
}

// parseClock reads "HH:MM" (24-hour) as minutes after midnight.
func parseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q is not a time like 22:00", s)
	}
	d := func(c byte) (int, bool) { return int(c - '0'), c >= '0' && c <= '9' }
	h1, ok1 := d(s[0])
	h2, ok2 := d(s[1])
	m1, ok3 := d(s[3])
	m2, ok4 := d(s[4])
	h, m := h1*10+h2, m1*10+m2
	if !ok1 || !ok2 || !ok3 || !ok4 || h > 23 || m > 59 {
		return 0, fmt.Errorf("%q is not a time like 22:00", s)
	}
	return h*60 + m, nil
}

// Clock formats minutes after midnight as "HH:MM".
func Clock(min int) string { return fmt.Sprintf("%02d:%02d", min/60, min%60) }

// Until returns when a message due at t may be sent: t itself outside
// quiet hours, else the moment the quiet hours around t end.
func (q Quiet) Until(t time.Time) time.Time {
	if q.Start == q.End || q.loc == nil {
		return t
	}
	local := t.In(q.loc)
	y, mo, d := local.Date()
	min := local.Hour()*60 + local.Minute()
	at := func(day, minute int) time.Time {
		return time.Date(y, mo, d+day, minute/60, minute%60, 0, 0, q.loc)
	}
	switch {
	case q.Start < q.End && min >= q.Start && min < q.End:
		return at(0, q.End).In(t.Location())
	case q.Start > q.End && min >= q.Start:
		return at(1, q.End).In(t.Location())
	case q.Start > q.End && min < q.End:
		return at(0, q.End).In(t.Location())
	}
	return t
}
