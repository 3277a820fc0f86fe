package store

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
)

// ErrUnavailable marks an error of a store that could not be reached or
// could not write: a full or failing disk, a lost or refused database
// connection, a database shutting down. A backend may wrap it; Unavailable
// also recognizes the drivers' own errors of that kind.
var ErrUnavailable = errors.New("store unavailable")

// Unavailable reports whether err says the store could not be reached or
// could not write, as opposed to a refusal for the request's content or a
// bug. A surface answers such an error 503 store_unavailable, which a
// client may retry, never 500.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO, syscall.EROFS, syscall.EDQUOT,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ETIMEDOUT} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// SQLite's result codes (the primary code is the low byte).
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6, 8, 10, 13, 14, 15: // BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL
			return true
		}
	}
	// PostgreSQL's SQLSTATE classes: connection exceptions, insufficient
	// resources, operator intervention (shutdown), system errors.
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		s := state.SQLState()
		switch {
		case strings.HasPrefix(s, "08"), strings.HasPrefix(s, "53"), strings.HasPrefix(s, "57P"), strings.HasPrefix(s, "58"):
			return true
		}
		return false
	}
	// The PostgreSQL driver's errors for a connection or pool that closed
	// under the request carry no type of their own outside the driver.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "closed pool") || strings.Contains(msg, "failed to connect")
}
