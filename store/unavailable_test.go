package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

type codedErr int

func (e codedErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e codedErr) Code() int     { return int(e) }

type stateErr string

func (e stateErr) Error() string    { return "pg error " + string(e) }
func (e stateErr) SQLState() string { return string(e) }

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"marked", fmt.Errorf("save: %w", ErrUnavailable), true},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"disk full", &fs.PathError{Op: "write", Path: "db", Err: syscall.ENOSPC}, true},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"sqlite full", fmt.Errorf("commit: %w", codedErr(13)), true},
		{"sqlite ioerr extended", codedErr(10 | 3<<8), true},
		{"sqlite constraint", codedErr(19), false},
		{"pg admin shutdown", stateErr("57P01"), true},
		{"pg connection failure", stateErr("08006"), true},
		{"pg unique violation", stateErr("23505"), false},
		{"pg conn closed", errors.New("conn closed"), true},
		{"not found", ErrNotFound, false},
		{"a bug", errors.New("index out of range"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable(tc.err); got != tc.want {
				t.Fatalf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
