package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// checkpointEvery is how often the checkpointer copies the write-ahead log
// back into the database file.
const checkpointEvery = 250 * time.Millisecond

// A checkpointer copies the write-ahead log back into the database file
// from its own goroutine.
//
// SQLite's automatic checkpoint runs inside the commit that crosses its
// threshold, so one write in a few hundred paid for copying every page
// written since the last one and for the fsync that ends it. The
// connections are opened with wal_autocheckpoint(0) and this goroutine
// runs a passive checkpoint on a timer instead: it never waits for
// readers or writers, and the log stays small because the timer is short.
// The last connection to close copies what is left and removes the log.
type checkpointer struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A busy database or a reader holding old pages only
				// leaves frames for the next round.
				_, _ = db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
			}
		}
	}()
	return c
}

// stop ends the checkpointer and waits for a checkpoint under way.
func (c *checkpointer) stop() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}
