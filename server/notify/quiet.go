package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/store"
)

// Settings of a person's channels and quiet hours.
const (
	// quietSetting holds "START END ZONE" ("22:00 07:00 Europe/Berlin").
	quietSetting = "notify.quiet."
	// mailOffSetting is "off" when the person takes no mail.
	mailOffSetting = "notify.mail_off."
)

// SetQuiet records the quiet hours of the person id; a zero Quiet
// (Start equal to End) removes them.
func SetQuiet(ctx context.Context, st store.Settings, id string, q notify.Quiet) error {
	v := ""
	if q.Start != q.End {
		v = notify.Clock(q.Start) + " " + notify.Clock(q.End) + " " + q.Zone
	}
	return st.SetSetting(ctx, quietSetting+id, v)
}

// QuietOf returns the quiet hours of the person id; ok is false when
// they set none.
func QuietOf(ctx context.Context, st store.Settings, id string) (q notify.Quiet, ok bool, err error) {
	v, err := st.Setting(ctx, quietSetting+id)
	if errors.Is(err, store.ErrNotFound) || err == nil && v == "" {
		return notify.Quiet{}, false, nil
	}
	if err != nil {
		return notify.Quiet{}, false, err
	}
	f := strings.Fields(v)
	if len(f) != 3 {
		return notify.Quiet{}, false, fmt.Errorf("quiet hours of %s: stored value %q is damaged", id, v)
	}
	q, err = notify.ParseQuiet(f[0], f[1], f[2])
	if err != nil {
		return notify.Quiet{}, false, fmt.Errorf("quiet hours of %s: %w", id, err)
	}
	return q, true, nil
}

// SetMailOn records whether the person id takes mail.
func SetMailOn(ctx context.Context, st store.Settings, id string, on bool) error {
	v := "off"
	if on {
		v = ""
	}
	return st.SetSetting(ctx, mailOffSetting+id, v)
}

// MailOn reports whether the person id takes mail (the default).
func MailOn(ctx context.Context, st store.Settings, id string) (bool, error) {
	v, err := st.Setting(ctx, mailOffSetting+id)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return v != "off", err
}
