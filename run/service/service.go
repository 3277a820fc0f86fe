// Package service is the side of a Run that does the work: a long-running
// process started by assent that accepts its declared Controls and reports
// through Trace.
//
// assent starts the process with ASSENT_URL, ASSENT_RUN_TOKEN,
// ASSENT_RUN_ID, ASSENT_RUN_INSTANCE_ID and ASSENT_CONTROL_FIFO in its
// environment. Serve reads wire records from the FIFO, claims each Control
// by id with the service's own generation (so a Control meant for another
// generation is never executed), calls the handler, and marks the Control
// handled, or failed with the handler's error:
//
//	svc, err := service.FromEnv()
//	if err != nil {
//		log.Fatal(err)
//	}
//	err = svc.Serve(ctx, func(ctx context.Context, c service.Control) error {
//		switch c.Action {
//		case "pause":
//			player.Pause()
//		}
//		return svc.Emit(ctx, service.Event{Kind: "player.state", Summary: c.Action})
//	})
package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Service talks to assent on behalf of one Run generation.
type Service struct {
	URL        string
	Token      string
	RunID      string
	InstanceID string
	FIFO       string
	HTTP       *http.Client
}

// FromEnv builds a Service from the environment assent gives a Run. It
// refuses to start without a generation, since claims are fenced by it.
func FromEnv() (*Service, error) {
	s := &Service{URL: os.Getenv("ASSENT_URL"), Token: os.Getenv("ASSENT_RUN_TOKEN"), RunID: os.Getenv("ASSENT_RUN_ID"),
		InstanceID: os.Getenv("ASSENT_RUN_INSTANCE_ID"), FIFO: os.Getenv("ASSENT_CONTROL_FIFO"),
		HTTP: &http.Client{Timeout: 30 * time.Second}}
	var missing []string
	for k, v := range map[string]string{"ASSENT_URL": s.URL, "ASSENT_RUN_TOKEN": s.Token, "ASSENT_RUN_ID": s.RunID, "ASSENT_RUN_INSTANCE_ID": s.InstanceID} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("service: not started by assent (missing %s)", strings.Join(missing, ", "))
	}
	return s, nil
}

// Control is a claimed Control.
type Control struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input,omitempty"`
	Status string          `json:"status"`
}

// Event is a Trace event a service emits; the server assigns its id and
// time. Kind is a lowercase semantic token such as "player.state"; Level
// is info, warning or error; Attention, when set, is notify, followup or
// steer.
type Event struct {
	Kind      string          `json:"kind"`
	Summary   string          `json:"summary,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Level     string          `json:"level,omitempty"`
	Attention string          `json:"attention,omitempty"`
}

// wireMaxBytes bounds one record read from the control FIFO.
const wireMaxBytes = 512

// wireID returns the Control id of one wire record
// {"id","action","input"}; the server checks the rest when the Control is
// claimed.
func wireID(line []byte) (string, error) {
	var w struct {
		ID string `json:"id"`
	}
	if len(line) > wireMaxBytes {
		return "", errors.New("wire record exceeds 512 bytes")
	}
	if err := json.Unmarshal(line, &w); err != nil {
		return "", err
	}
	if w.ID == "" {
		return "", errors.New("wire record has no id")
	}
	return w.ID, nil
}

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errNilContext refuses a call made with a nil context.
var errNilContext = &Error{Code: "invalid_request", Message: "a nil context.Context was passed; pass the caller's context or context.Background()"}

func (s *Service) call(ctx context.Context, path string, body, out any) error {
	if ctx == nil {
		return errNilContext
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.URL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	client := s.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var env struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(data, &env) == nil && env.Error != nil {
			env.Error.Status = resp.StatusCode
			return env.Error
		}
		return &Error{Status: resp.StatusCode, Code: "http_error", Message: strings.TrimSpace(string(data))}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (s *Service) runPath(rest string) string { return "/v1/runs/" + url.PathEscape(s.RunID) + rest }

// Claim claims Control id (the oldest claimable one when id is empty).
func (s *Service) Claim(ctx context.Context, id string) (Control, error) {
	var c Control
	err := s.call(ctx, s.runPath("/controls/claim"), map[string]string{"id": id, "run_instance_id": s.InstanceID}, &c)
	return c, err
}

// Handled marks a claimed Control handled.
func (s *Service) Handled(ctx context.Context, id string) error {
	return s.call(ctx, s.runPath("/controls/"+url.PathEscape(id)+"/handled"), map[string]string{"run_instance_id": s.InstanceID}, nil)
}

// Failed marks a claimed Control failed with msg (kept up to 4 KiB).
func (s *Service) Failed(ctx context.Context, id, msg string) error {
	return s.call(ctx, s.runPath("/controls/"+url.PathEscape(id)+"/failed"), map[string]string{"error": msg, "run_instance_id": s.InstanceID}, nil)
}

// Emit appends a Trace event to the Run.
func (s *Service) Emit(ctx context.Context, ev Event) error {
	return s.call(ctx, s.runPath("/trace"), ev, nil)
}

// Handler handles one claimed Control. A returned error marks it failed.
type Handler func(ctx context.Context, c Control) error

// Serve reads Controls from the generation's FIFO until ctx is done. Each
// wire record is claimed by id; a record that cannot be claimed (another
// generation's, or never journaled) is skipped with a warning Trace event
// and never handled.
func (s *Service) Serve(ctx context.Context, h Handler) error {
	if ctx == nil {
		return errNilContext
	}
	if s.FIFO == "" {
		return errors.New("service: no control FIFO (ASSENT_CONTROL_FIFO is empty)")
	}
	// Opened read-write so the FIFO never reports end of file between
	// writers.
	f, err := os.OpenFile(s.FIFO, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("service: open control FIFO: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	defer f.Close()
	rd := bufio.NewReaderSize(f, wireMaxBytes*2)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("service: read control FIFO: %w", err)
		}
		id, err := wireID(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			_ = s.Emit(ctx, Event{Kind: "service.control_rejected", Summary: "malformed Control wire record", Level: "warning"})
			continue
		}
		s.handle(ctx, id, h)
	}
}

func (s *Service) handle(ctx context.Context, id string, h Handler) {
	c, err := s.Claim(ctx, id)
	if err != nil {
		_ = s.Emit(ctx, Event{Kind: "service.control_rejected", Summary: "Control " + id + " could not be claimed: " + err.Error(), Level: "warning"})
		return
	}
	if err := h(ctx, c); err != nil {
		_ = s.Failed(ctx, c.ID, err.Error())
		return
	}
	_ = s.Handled(ctx, c.ID)
}
