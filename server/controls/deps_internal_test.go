package controls

import "github.com/assent-run/assent/server/internal/host"

// hostDeps is what a server gives the part, taken from h.
func hostDeps(h *host.Host) Deps {
	return Deps{
		Gate: h, Store: Stores{Audit: h.Store.Audit, ControlRegistry: h.Store.ControlRegistry, Settings: h.Store.Settings},
		Bus: h.Bus, SharedBus: h.SharedBus, Origin: h.Origin, Tools: h.Tools, Log: h.Log, Now: h.Now, Web: h.Web,
		Config: Config{BaseURL: h.Config.BaseURL},
	}
}
