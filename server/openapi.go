package server

import (
	"net/http"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/wire"
)

// handleOpenAPI serves the OpenAPI document of the HTTP API. It needs no
// token: the document holds no secrets, and clients in other languages
// generate their code from it.
func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := api.OpenAPI()
	if err != nil {
		host.WriteError(w, wire.Internal, "the OpenAPI document could not be built; this is a bug")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(doc)
}
