package server_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// openAPIDoc fetches the served document without a token.
func openAPIDoc(t *testing.T, f *assenttest.Kit) []byte {
	t.Helper()
	resp := f.Req("GET", api.OpenAPIPath, "", nil, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s without a token: %d %s", api.OpenAPIPath, resp.StatusCode, body)
	}
	return body
}

// The document lists every /v1 route the server mounts, and none it does
// not.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	f := assenttest.Start(t, nil)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDoc(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.(map[string]any)["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	var mounted []string
	for _, p := range f.Srv.Patterns() {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/v1/") {
			mounted = append(mounted, p)
		}
	}
	slices.Sort(documented)
	slices.Sort(mounted)
	if len(mounted) < 40 {
		t.Fatalf("only %d /v1 routes mounted: %v", len(mounted), mounted)
	}
	for _, p := range mounted {
		if _, ok := slices.BinarySearch(documented, p); !ok {
			t.Errorf("%s is mounted but not in the OpenAPI document", p)
		}
	}
	for _, p := range documented {
		if _, ok := slices.BinarySearch(mounted, p); !ok {
			t.Errorf("%s is in the OpenAPI document but not mounted", p)
		}
	}
}

// Real answers, successes and errors, conform to the schemas the document
// gives their route and status.
func TestOpenAPIDescribesRealAnswers(t *testing.T) {
	f := assenttest.StartDemo(t)
	raw := openAPIDoc(t, f)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	pointer := strings.NewReplacer("~", "~0", "/", "~1")
	// schemaFor compiles the schema of the answer with status to the
	// route pattern, or the route's default (error) answer.
	schemaFor := func(pattern string, status int) *jsonschema.Schema {
		t.Helper()
		method, path, _ := strings.Cut(pattern, " ")
		responses := doc.(map[string]any)["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)["responses"].(map[string]any)
		key := strconv.Itoa(status)
		if _, ok := responses[key]; !ok {
			key = "default"
		}
		loc := "openapi.json#/paths/" + pointer.Replace(path) + "/" + strings.ToLower(method) + "/responses/" + key + "/content/application~1json/schema"
		s, err := c.Compile(loc)
		if err != nil {
			t.Fatalf("%s %d: %v", pattern, status, err)
		}
		return s
	}
	svc, _ := f.Issue(store.KindService, "runner")
	for _, tc := range []struct {
		pattern, path, token, body string
		status                     int
	}{
		{"GET /v1/health", "/v1/health", "", "", 200},
		{"GET /v1/ready", "/v1/ready", "", "", 200},
		{"GET /v1/whoami", "/v1/whoami", f.Token, "", 200},
		{"GET /v1/whoami", "/v1/whoami", "", "", 401},
		{"GET /v1/controls", "/v1/controls", f.Token, "", 200},
		{"GET /v1/controls/{formId}/{controlId}", "/v1/controls/profile/plan", f.Token, "", 200},
		{"GET /v1/controls/{formId}/{controlId}", "/v1/controls/nope/nope", f.Token, "", 404},
		{"POST /v1/controls/execute", "/v1/controls/execute", f.Token, `{"action":"stage","identity":{"formId":"profile","controlId":"plan"},"value":"pro"}`, 200},
		{"POST /v1/controls/execute", "/v1/controls/execute", f.Token, `{"action":"apply","identity":{"formId":"nope","controlId":"nope"},"value":"x"}`, 404},
		{"GET /v1/audit", "/v1/audit", f.Token, "", 200},
		{"GET /v1/audit", "/v1/audit?limit=0", f.Token, "", 400},
		{"POST /v1/runs", "/v1/runs", f.Token, `{"template":"echo hi","run_id":"hello"}`, 202},
		{"POST /v1/runs", "/v1/runs", f.Token, `{"recipe":`, 400},
		{"GET /v1/runs", "/v1/runs", f.Token, "", 200},
		{"POST /v1/runs", "/v1/runs", svc, `{"template":"true","run_id":"r1"}`, 201},
		{"GET /v1/runs/{id}", "/v1/runs/r1", svc, "", 200},
		{"GET /v1/runs", "/v1/runs", svc, "", 200},
		{"GET /v1/runs/{id}", "/v1/runs/nope", f.Token, "", 404},
		{"GET /v1/proposals", "/v1/proposals", f.Token, "", 200},
		{"GET /v1/flows/approvals/{id}", "/v1/flows/approvals/nope", f.Token, "", 404},
		{"POST /v1/flows/instances", "/v1/flows/instances", f.Token, `{"program":"nope","phase":"x"}`, 404},
		{"GET /v1/flows/programs", "/v1/flows/programs", f.Token, "", 200},
		{"GET /v1/flows/programs/{fingerprint}", "/v1/flows/programs/nope", f.Token, "", 404},
		{"POST /v1/flows/prescriptions/{id}/apply", "/v1/flows/prescriptions/nope/apply", f.Token, `{"parameters":{}}`, 404},
		{"POST /v1/flows/instances", "/v1/flows/instances", f.Token, `{"program":"expense-approval","id":"e-1","phase":"draft"}`, 201},
		{"GET /v1/flows/instances", "/v1/flows/instances", f.Token, "", 200},
		{"GET /v1/flows/instances/{id}", "/v1/flows/instances/e-1", f.Token, "", 200},
		{"POST /v1/flows/instances/{id}/prescribe", "/v1/flows/instances/e-1/prescribe", f.Token, `{}`, 200},
		{"GET /v1/flows/approvals", "/v1/flows/approvals", f.Token, "", 200},
		{"POST /v1/screens", "/v1/screens", f.Token, "root = Text($s)\n$s = \"start\"\n", 201},
		{"GET /v1/screens", "/v1/screens", f.Token, "", 200},
		{"GET /v1/screens/{id}", "/v1/screens/nope", f.Token, "", 404},
	} {
		t.Run(tc.pattern+" "+strconv.Itoa(tc.status), func(t *testing.T) {
			var rd io.Reader
			method, _, _ := strings.Cut(tc.pattern, " ")
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
			}
			resp := f.Req(method, tc.path, tc.token, rd, map[string]string{"Content-Type": "application/json"})
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s: status %d, want %d: %s", method, tc.path, resp.StatusCode, tc.status, body)
			}
			if tc.status >= 400 {
				if err := wire.Check(body); err != nil {
					t.Fatalf("not the error shape: %v: %s", err, body)
				}
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("answer is not JSON: %v: %s", err, body)
			}
			if err := schemaFor(tc.pattern, tc.status).Validate(v); err != nil {
				t.Fatalf("the answer does not conform to the document:\n%v\n%s", err, body)
			}
		})
	}
}

// A schema of the document refuses what its type would not write, so the
// check above can fail.
func TestOpenAPISchemasRefuseWrongAnswers(t *testing.T) {
	f := assenttest.Start(t, nil)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDoc(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("openapi.json#/paths/~1v1~1whoami/get/responses/200/content/application~1json/schema")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"kind":"agent","name":"a","grants":[],"supervisors":[],"created_at":"2026-01-01T00:00:00Z"}`,
		`{"id":1,"kind":"agent","name":"a","grants":[],"supervisors":[],"created_at":"2026-01-01T00:00:00Z"}`,
		`{"id":"p","kind":"agent","name":"a","grants":"x","supervisors":[],"created_at":"2026-01-01T00:00:00Z"}`,
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if s.Validate(v) == nil {
			t.Errorf("whoami schema accepts %s", bad)
		}
	}
	errs, err := c.Compile("openapi.json#/components/schemas/Error")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"error":{"code":"not_found"}}`))
	if errs.Validate(v) == nil {
		t.Error("the Error schema accepts an error without message and retryable")
	}
}

// A route the document marks public answers without a token; every other
// route asks for one (401 sign_in_required).
func TestOpenAPISecurityMatchesTheRoutes(t *testing.T) {
	f := assenttest.Start(t, nil)
	fill := strings.NewReplacer("{", "", "}", "")
	for _, r := range api.Routes() {
		path := fill.Replace(r.Path)
		resp := f.Req(r.Method, path, "", nil, nil)
		resp.Body.Close()
		if asked := resp.StatusCode == http.StatusUnauthorized; asked == r.Public {
			t.Errorf("%s without a token: %d, and the document says public=%v", r.Pattern(), resp.StatusCode, r.Public)
		}
	}
}
