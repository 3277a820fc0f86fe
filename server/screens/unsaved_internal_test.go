package screens

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// fullDisk is a screens store whose writes fail as on a full disk once
// full is set: the save of the screen, the append to the live feed, or
// both.
type fullDisk struct {
	store.Screens
	save, feed bool
}

var errDiskFull = fmt.Errorf("write: %w", syscall.ENOSPC)

func (d *fullDisk) UpdateScreen(ctx context.Context, sc store.Screen, prev int64) error {
	if d.save {
		return errDiskFull
	}
	return d.Screens.UpdateScreen(ctx, sc, prev)
}

func (d *fullDisk) AppendScreenUpdate(ctx context.Context, id, text string) (int64, error) {
	if d.feed {
		return 0, errDiskFull
	}
	return d.Screens.AppendScreenUpdate(ctx, id, text)
}

// A live update the store refuses is never acknowledged: not saved at all,
// it is store_unavailable with committed false and followers are not told
// of it; saved with the screen but missing from the live feed, it is
// store_unavailable with committed true.
func TestUpdateUnsavedIsNotAcknowledged(t *testing.T) {
	a, _, agent := twoNodes(t)
	ctx := context.Background()
	disk := &fullDisk{Screens: a.Store.Screens}
	a.Store.Screens = disk
	id, err := a.Show(ctx, agent, nodesStream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := mustScreen(t, a, agent, id)
	for _, tc := range []struct {
		name       string
		save, feed bool
		committed  bool
	}{
		{"screen not saved", true, false, false},
		{"feed not saved", false, true, true},
		{"nothing saved", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk.save, disk.feed = tc.save, tc.feed
			defer func() { disk.save, disk.feed = false, false }()
			sc.mu.RLock()
			before := len(sc.updates)
			sc.mu.RUnlock()
			_, err := a.Update(ctx, id, `$s = "`+tc.name+`"`)
			var te *tool.Error
			if !errors.As(err, &te) || te.Code != "store_unavailable" || te.Data["committed"] != tc.committed {
				t.Fatalf("Update = %v (data %v), want store_unavailable with committed %v", err, te, tc.committed)
			}
			sc.mu.RLock()
			after := len(sc.updates)
			sc.mu.RUnlock()
			if !tc.committed && after != before {
				t.Errorf("an unsaved update joined the live feed (%d → %d updates)", before, after)
			}
		})
	}
	if _, err := a.Update(ctx, id, `$s = "saved"`); err != nil {
		t.Fatalf("Update with the store back = %v", err)
	}
}
