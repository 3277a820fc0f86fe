package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
	"github.com/google/jsonschema-go/jsonschema"
)

// OpenAPIPath is where the server serves the document.
const OpenAPIPath = "/v1/openapi.json"

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API, built from
// [Routes] and the Go types they name. It is the same on every call.
func OpenAPI() ([]byte, error) { return openAPI() }

var openAPI = sync.OnceValues(func() ([]byte, error) {
	doc, err := buildDocument(Routes())
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
})

// IssueSchema is the schema of a screen.Issue as it is written on the
// wire (its MarshalJSON): the 1-based line, or null when the issue
// concerns no line, the code and the message.
func IssueSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"line":    {Types: []string{"integer", "null"}, Description: "the 1-based line, or null when the issue concerns no line"},
			"code":    {Type: "string", Description: "one of the codes of the Omni IR specification's section 7"},
			"message": {Type: "string", Description: "what is wrong and how to fix it"},
		},
		Required: []string{"line", "code", "message"},
	}
}

// SchemaOf returns the JSON Schema of t as the document gives it: the
// schema a tool's types give (tool.SchemaFor, tags included), with every
// field the type always writes required and other fields allowed, so a
// server that adds a field stays valid for old clients.
func SchemaOf(t reflect.Type) (*jsonschema.Schema, error) {
	opts := tool.SchemaOptions()
	opts.IgnoreInvalidTypes = true
	opts.TypeSchemas[reflect.TypeFor[screen.Issue]()] = IssueSchema()
	s, err := tool.SchemaFor(t, opts)
	if err != nil {
		return nil, err
	}
	tool.OpenObjects(s)
	return s, nil
}

type document struct {
	OpenAPI    string                           `json:"openapi"`
	Info       info                             `json:"info"`
	Paths      map[string]map[string]*operation `json:"paths"`
	Components components                       `json:"components"`
}

type info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

type components struct {
	Schemas         map[string]*jsonschema.Schema `json:"schemas"`
	SecuritySchemes map[string]securityScheme     `json:"securitySchemes"`
}

type securityScheme struct {
	Type   string `json:"type"`
	Scheme string `json:"scheme"`
}

type operation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Parameters  []parameter           `json:"parameters,omitempty"`
	RequestBody *body                 `json:"requestBody,omitempty"`
	Responses   map[string]*response  `json:"responses"`
	Security    []map[string][]string `json:"security,omitempty"`
}

type parameter struct {
	Name        string             `json:"name"`
	In          string             `json:"in"`
	Description string             `json:"description,omitempty"`
	Required    bool               `json:"required"`
	Explode     *bool              `json:"explode,omitempty"`
	Schema      *jsonschema.Schema `json:"schema"`
}

type body struct {
	Required bool                 `json:"required,omitempty"`
	Content  map[string]mediaType `json:"content"`
}

type response struct {
	Description string               `json:"description"`
	Content     map[string]mediaType `json:"content,omitempty"`
}

type mediaType struct {
	Schema *jsonschema.Schema `json:"schema"`
}

const jsonType = "application/json"

func buildDocument(routes []Route) (*document, error) {
	errSchema, err := SchemaOf(reflect.TypeFor[wire.Body]())
	if err != nil {
		return nil, err
	}
	doc := &document{
		OpenAPI: "3.1.0",
		Info: info{Title: "assent HTTP API", Version: assent.Version,
			Description: "Every error answer is {\"error\": Error} with the status of its code (docs/http.md)."},
		Paths: map[string]map[string]*operation{},
		Components: components{
			Schemas:         map[string]*jsonschema.Schema{"Error": errSchema},
			SecuritySchemes: map[string]securityScheme{"bearer": {Type: "http", Scheme: "bearer"}},
		},
	}
	errRef := &jsonschema.Schema{Ref: "#/components/schemas/Error"}
	for _, r := range routes {
		op := &operation{OperationID: operationID(r), Summary: r.Summary, Responses: map[string]*response{}}
		for _, name := range pathParams(r.Path) {
			op.Parameters = append(op.Parameters, parameter{Name: name, In: "path", Required: true, Schema: &jsonschema.Schema{Type: "string"}})
		}
		for _, q := range r.Query {
			op.Parameters = append(op.Parameters, queryParameter(q))
		}
		if !r.Public {
			op.Security = []map[string][]string{{"bearer": {}}}
		}
		if r.Request != nil {
			s, err := SchemaOf(r.Request)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Pattern(), err)
			}
			op.RequestBody = &body{Required: true, Content: map[string]mediaType{jsonType: {Schema: s}}}
		} else if r.RequestText != "" {
			op.RequestBody = &body{Required: true, Content: map[string]mediaType{r.RequestText: {Schema: &jsonschema.Schema{Type: "string"}}}}
		}
		ok := &response{Description: http.StatusText(r.Status)}
		switch {
		case r.Status == http.StatusNoContent:
		case r.ContentType != "":
			ok.Content = map[string]mediaType{r.ContentType: {Schema: &jsonschema.Schema{Type: "string"}}}
		case r.Response != nil:
			s, err := SchemaOf(r.Response)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Pattern(), err)
			}
			ok.Content = map[string]mediaType{jsonType: {Schema: s}}
		default:
			ok.Content = map[string]mediaType{jsonType: {Schema: &jsonschema.Schema{Type: "object"}}}
		}
		op.Responses[fmt.Sprint(r.Status)] = ok
		if r.Accepted != nil {
			s, err := SchemaOf(r.Accepted)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Pattern(), err)
			}
			op.Responses["202"] = &response{Description: "Filed for a person's decision", Content: map[string]mediaType{jsonType: {Schema: s}}}
		}
		op.Responses["default"] = &response{Description: "An error", Content: map[string]mediaType{jsonType: {Schema: errRef}}}
		item := doc.Paths[r.Path]
		if item == nil {
			item = map[string]*operation{}
			doc.Paths[r.Path] = item
		}
		m := strings.ToLower(r.Method)
		if item[m] != nil {
			return nil, fmt.Errorf("%s is listed twice", r.Pattern())
		}
		item[m] = op
	}
	return doc, nil
}

// queryParameter is the OpenAPI parameter of q: optional, and, when
// repeated, an array given as the parameter again for each value.
func queryParameter(q QueryParam) parameter {
	s := &jsonschema.Schema{Type: q.Type, Enum: nil}
	for _, v := range q.Enum {
		s.Enum = append(s.Enum, v)
	}
	if q.Min != nil {
		f := float64(*q.Min)
		s.Minimum = &f
	}
	if q.Max != nil {
		f := float64(*q.Max)
		s.Maximum = &f
	}
	if q.MaxLength > 0 {
		n := q.MaxLength
		s.MaxLength = &n
	}
	p := parameter{Name: q.Name, In: "query", Description: q.Description, Schema: s}
	if q.Repeated {
		explode := true
		p.Schema = &jsonschema.Schema{Type: "array", Items: s}
		p.Explode = &explode
	}
	return p
}

// pathParams returns the names of the wildcards of a path, in order.
func pathParams(path string) []string {
	var out []string
	for seg := range strings.SplitSeq(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(seg, "{"), "}"))
		}
	}
	return out
}

// operationID names an operation after its method and its path's fixed
// segments: GET /v1/runs/{id}/logs is get_runs_logs.
func operationID(r Route) string {
	parts := []string{strings.ToLower(r.Method)}
	for seg := range strings.SplitSeq(strings.TrimPrefix(r.Path, "/v1/"), "/") {
		if strings.HasPrefix(seg, "{") {
			parts = append(parts, "by_"+strings.Trim(seg, "{}"))
			continue
		}
		parts = append(parts, strings.NewReplacer(".", "_", "-", "_").Replace(seg))
	}
	return strings.Join(parts, "_")
}
