package screens

import (
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/internal/host"
)

// hostControlsDeps is what a server gives the controls part, taken from h.
func hostControlsDeps(h *host.Host) controls.Deps {
	return controls.Deps{
		Gate: h, Store: controls.Stores{Audit: h.Store.Audit, ControlRegistry: h.Store.ControlRegistry, Settings: h.Store.Settings},
		Bus: h.Bus, SharedBus: h.SharedBus, Origin: h.Origin, Tools: h.Tools, Log: h.Log, Now: h.Now, Web: h.Web,
		Config: controls.Config{BaseURL: h.Config.BaseURL},
	}
}

// hostDeps is what a server gives the part, taken from h, with ctl
// holding the screens' fields.
func hostDeps(h *host.Host, ctl Controls) Deps {
	return Deps{
		Gate:     h,
		Store:    Stores{Principals: h.Store.Principals, Sessions: h.Store.Sessions, Screens: h.Store.Screens},
		Controls: ctl, Bus: h.Bus, SharedBus: h.SharedBus, Origin: h.Origin, Streams: h.Streams,
		Tools: h.Tools, Log: h.Log, Now: h.Now, Started: h.Started, Web: h.Web,
		Config: Config{DataDir: h.Config.DataDir, BaseURL: h.Config.BaseURL},
	}
}
