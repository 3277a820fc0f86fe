package server

import (
	"net/http"
	"strings"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/wire"
)

func (s *Server) routesWeb(mux *host.Mux) {
	s.host.RoutesSignIn(mux)
	mux.Handle("GET /inbox", s.host.WebPage(s.handleInbox))
	s.routesInboxWeb(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.handleNotFound(w, r, mux.ServeMux) })
}

// handleNotFound answers requests no other route matches. A path that
// other methods serve gets method_not_allowed with an Allow header, as the
// mux would answer; API and MCP clients get the JSON error; people get a
// page with a way back.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		host.WriteError(w, wire.MethodNotAllowed, "this path does not take "+r.Method+"; use "+strings.Join(allow, " or "))
		return
	}
	if p := r.URL.Path; strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/mcp") || strings.HasPrefix(p, "/static/") {
		host.WriteError(w, wire.NotFound, "no such path; see docs/http.md for the API's paths")
		return
	}
	pg := host.Page{Title: "Not found"}
	if p, sess, ok := s.host.WebSession(r); ok {
		pg.Principal, pg.CSRF = &p, sess.CSRF
	}
	s.host.Web.Render(w, http.StatusNotFound, "notfound", pg)
}

func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request, pg host.Page) {
	var sections []host.InboxSection
	for _, part := range s.parts {
		in, ok := part.(host.Inboxer)
		if !ok {
			continue
		}
		secs, err := in.Inbox(r.Context(), *pg.Principal)
		if err != nil {
			s.host.Log.Error("inbox section failed", "part", part.Name(), "err", err)
			continue
		}
		sections = append(sections, secs...)
	}
	sections = s.host.RoutedItems(r.Context(), *pg.Principal, sections)
	decidable := 0
	for _, sec := range sections {
		for _, it := range sec.Items {
			if it.Decision != nil {
				decidable++
			}
		}
	}
	bars, bySection := inboxBatches(sections)
	pg.Title = "Inbox"
	pg.Data = map[string]any{"Sections": sections, "Decidable": decidable, "Batches": bars, "SectionBatches": bySection}
	if r.URL.Query().Get("partial") == "1" {
		s.host.Web.RenderPartial(w, "inbox", "sections", pg)
		return
	}
	pg.Data = map[string]any{"Sections": sections, "Decidable": decidable, "Batches": bars, "SectionBatches": bySection, "Notice": s.host.TakeNotice(w, r)}
	s.host.Web.Render(w, http.StatusOK, "inbox", pg)
}
