package confirm

import (
	"context"
	"fmt"
	"sync"
)

// Pending is a press that passed every check and waits for the person:
// [Pending.Confirm] runs its handler, [Pending.Cancel] drops it. Its handler
// runs at most once, however many times and from however many goroutines
// Confirm is called.
type Pending struct {
	reg      *Registry
	entry    *entry
	params   map[string]any
	sentence string

	mu        sync.Mutex
	started   bool
	cancelled bool
	done      chan struct{} // closed when the handler has returned
	result    Result
	err       error
}

// Tool returns the name of the tool the press runs.
func (p *Pending) Tool() string { return p.entry.tool.Name }

// Sentence returns the plain-text sentence the person confirms, in the
// application's words, or "" when the tool asks for no confirmation. Show it
// as text, never as markup.
func (p *Pending) Sentence() string { return p.sentence }

// NeedsConfirmation reports whether the person must confirm before
// [Pending.Confirm] is called: whether the tool has a confirmation.
func (p *Pending) NeedsConfirmation() bool { return p.sentence != "" }

// Params returns a copy of the params that passed the tool's schema: what
// the handler will be given. It includes secret params; never log it.
func (p *Pending) Params() map[string]any {
	c, _ := plainJSON(p.params)
	m, _ := c.(map[string]any)
	return m
}

// Confirm runs the tool's handler with the checked params, once, and
// returns its result. A handler error (or panic) is returned as an [*Error]
// with code handler_failed that wraps it.
//
// Every call after the first returns the first call's outcome without
// running anything again; a call made while the handler runs waits for it.
// After [Pending.Cancel], Confirm fails with cancelled. When the tool was
// replaced or removed since [Registry.Prepare], Confirm fails with
// tool_changed and runs nothing, because the person may have confirmed
// another tool's sentence.
//
// If ctx is done before the handler starts, Confirm returns ctx's error and
// the press stays pending. Once started, the handler is given ctx and the
// press settles with whatever it returns; a call that stops waiting for a
// handler another call started returns ctx's error although the handler
// keeps running.
func (p *Pending) Confirm(ctx context.Context) (Result, error) {
	p.mu.Lock()
	switch {
	case p.cancelled:
		p.mu.Unlock()
		return Result{}, &Error{Code: CodeCancelled, Tool: p.Tool(), Message: fmt.Sprintf("the press of %q was cancelled, so it can't be confirmed; press again", p.Tool())}
	case p.started:
		p.mu.Unlock()
		select {
		case <-p.done:
			return p.result, p.err
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		p.mu.Unlock()
		return Result{}, err
	}
	p.started = true
	p.mu.Unlock()

	p.result, p.err = p.run(ctx)
	close(p.done)
	return p.result, p.err
}

func (p *Pending) run(ctx context.Context) (res Result, err error) {
	name := p.Tool()
	if p.reg.entry(name) != p.entry {
		return Result{}, &Error{Code: CodeToolChanged, Tool: name, Message: fmt.Sprintf("tool %q was replaced or removed after this press was prepared, so nothing ran; press again", name)}
	}
	defer func() {
		if r := recover(); r != nil {
			res, err = Result{}, &Error{Code: CodeHandlerFailed, Tool: name, Message: fmt.Sprintf("the handler of %q panicked: %v", name, r), Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	res, err = p.entry.tool.Handler(ctx, Request{Tool: name, Params: p.Params()})
	if err != nil {
		return Result{}, &Error{Code: CodeHandlerFailed, Tool: name, Message: fmt.Sprintf("the handler of %q failed: %v", name, err), Err: err}
	}
	return res, nil
}

// Cancel drops the press: its handler will never run. It reports whether
// the press was cancelled by this call; false means it had already been
// cancelled or confirmed (a handler that started keeps running).
func (p *Pending) Cancel() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.cancelled {
		return false
	}
	p.cancelled = true
	return true
}
