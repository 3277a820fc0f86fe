package screens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/tool"
)

// toolFileEntry is one tool of tools.json, for applications not written in
// Go: each tool is backed by an HTTP callback.
type toolFileEntry struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Params      json.RawMessage `json:"params"`
	Secret      []string        `json:"secret"`
	// Confirm is the confirmation template, such as "Pay {amount}?".
	Confirm string `json:"confirm"`
	// Currency maps money params to their ISO 4217 code, such as
	// {"amount": "USD"} (see Tool.Currency).
	Currency map[string]string `json:"currency"`
	Access   Access            `json:"access"`
	Callback string            `json:"callback"`
}

// callbackTimeout bounds one call of a tool's HTTP callback.
const callbackTimeout = 30 * time.Second

func (s *Part) callbackClient() *http.Client {
	return &http.Client{Timeout: callbackTimeout}
}

// parseToolsFile reads tools.json: {"tools": [{name, description, params,
// secret, confirm, currency, access, callback}, …]}.
func parseToolsFile(b []byte, hc *http.Client) ([]Tool, error) {
	var f struct {
		Tools []toolFileEntry `json:"tools"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a tools file ({\"tools\": [{\"name\", \"params\", \"callback\", …}]}): %w", err)
	}
	if !atEnd(dec) {
		return nil, fmt.Errorf("not a tools file: something follows its one JSON object; keep every tool in one {\"tools\": […]}")
	}
	out := make([]Tool, 0, len(f.Tools))
	for i, e := range f.Tools {
		u, err := url.Parse(e.Callback)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("tools[%d] (%s): callback must be an http or https URL", i, e.Name)
		}
		t := Tool{Access: e.Access, Currency: e.Currency, Tool: confirm.Tool{
			Name: e.Name, Description: e.Description, Params: e.Params, Secret: e.Secret,
			Handler: callbackHandler(hc, u.String()),
		}}
		if e.Confirm != "" {
			t.Confirm = confirm.Template(e.Confirm)
		}
		out = append(out, t)
	}
	return out, nil
}

// callbackHandler runs a tool by POSTing {"tool", "params"} to url. The
// callback answers 2xx with {"result": {…}, "update": "…"}, or an error
// status with {"error": {"code", "message"}}: code not_found for what the
// params name that is missing or not the caller's, any other code for the
// tool's own conflict.
func callbackHandler(hc *http.Client, url string) confirm.Handler {
	return func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
		body, err := json.Marshal(map[string]any{"tool": req.Tool, "params": req.Params})
		if err != nil {
			return confirm.Result{}, err
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return confirm.Result{}, err
		}
		hr.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(hr)
		if err != nil {
			return confirm.Result{}, fmt.Errorf("the tool's callback could not be reached: %w", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return confirm.Result{}, err
		}
		if resp.StatusCode/100 != 2 {
			var e struct {
				Error *tool.Error `json:"error"`
			}
			if json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Code != "" && e.Error.Code != "tool_failed" && resp.StatusCode < 500 {
				return confirm.Result{}, e.Error
			}
			return confirm.Result{}, fmt.Errorf("the tool's callback answered %s", resp.Status)
		}
		var out struct {
			Result map[string]any `json:"result"`
			Update any            `json:"update"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return confirm.Result{}, errors.New("the tool's callback answered something other than a JSON object")
		}
		res := confirm.Result{Value: out.Result}
		if u, ok := out.Update.(string); ok {
			res.Update = u
		}
		return res, nil
	}
}
