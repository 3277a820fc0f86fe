package notify

import (
	"testing"
	"time"
)

func TestQuietUntil(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	on := func(day, h, m int) time.Time { return time.Date(2026, 3, day, h, m, 0, 0, berlin) }
	for _, tc := range []struct {
		name, start, end string
		at, want         time.Time
	}{
		{"night, before midnight", "22:00", "07:00", on(10, 23, 30), on(11, 7, 0)},
		{"night, after midnight", "22:00", "07:00", on(11, 3, 0), on(11, 7, 0)},
		{"night, at the end", "22:00", "07:00", on(11, 7, 0), on(11, 7, 0)},
		{"night, daytime", "22:00", "07:00", on(11, 12, 0), on(11, 12, 0)},
		{"night, at the start", "22:00", "07:00", on(11, 22, 0), on(12, 7, 0)},
		{"lunch", "12:00", "13:30", on(11, 12, 59), on(11, 13, 30)},
		{"lunch, outside", "12:00", "13:30", on(11, 14, 0), on(11, 14, 0)},
		{"none", "09:00", "09:00", on(11, 9, 0), on(11, 9, 0)},
		// 29 March 2026: clocks go from 02:00 to 03:00 in Berlin.
		{"across a clock change", "01:00", "04:00", on(29, 1, 30), on(29, 4, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseQuiet(tc.start, tc.end, "Europe/Berlin")
			if err != nil {
				t.Fatal(err)
			}
			if got := q.Until(tc.at.UTC()); !got.Equal(tc.want) {
				t.Errorf("Until(%v) = %v, want %v", tc.at, got.In(berlin), tc.want)
			}
		})
	}
}

func TestParseQuietRefuses(t *testing.T) {
	for _, in := range [][3]string{
		{"24:00", "07:00", "UTC"}, {"22:60", "07:00", "UTC"}, {"7:00", "08:00", "UTC"}, {"22:00", "07:00", ""},
		{"22:00", "07:00", "Mars/Olympus"}, {"22:00", "07:00", "../../etc/passwd"}, {"2a:00", "07:00", "UTC"},
	} {
		if _, err := ParseQuiet(in[0], in[1], in[2]); err == nil {
			t.Errorf("ParseQuiet%q accepted", in)
		}
	}
}

func FuzzParseQuiet(f *testing.F) {
	f.Add("22:00", "07:00", "Europe/Berlin", int64(0))
	f.Add("00:00", "23:59", "UTC", int64(1e12))
	f.Add("12:3x", "", "Local", int64(-1))
	f.Fuzz(func(t *testing.T, start, end, zone string, sec int64) {
		q, err := ParseQuiet(start, end, zone)
		if err != nil {
			return
		}
		if q.Start < 0 || q.Start >= 1440 || q.End < 0 || q.End >= 1440 || Clock(q.Start) != start || Clock(q.End) != end {
			t.Fatalf("ParseQuiet(%q, %q) = %+v", start, end, q)
		}
		at := time.Unix(sec%(1<<34), 0).UTC()
		if u := q.Until(at); u.Before(at) || u.Sub(at) > 25*time.Hour {
			t.Fatalf("Until(%v) = %v", at, u)
		}
	})
}
