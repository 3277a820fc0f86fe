package server

import (
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/screens"
)

// The parts' dependencies, taken from the host and the parts built before.

func controlsDeps(h *host.Host) controls.Deps {
	return controls.Deps{
		Gate:      h,
		Store:     controls.Stores{Audit: h.Store.Audit, ControlRegistry: h.Store.ControlRegistry},
		Bus:       h.Bus,
		SharedBus: h.SharedBus,
		Origin:    h.Origin,
		Tools:     h.Tools,
		Log:       h.Log,
		Now:       h.Now,
		Web:       h.Web,
		Config:    controls.Config{BaseURL: h.Config.BaseURL, Demo: h.Config.Demo},
	}
}

func screensDeps(h *host.Host, ctl screens.Controls) screens.Deps {
	return screens.Deps{
		Gate:      h,
		Store:     screens.Stores{Principals: h.Store.Principals, Sessions: h.Store.Sessions, Screens: h.Store.Screens},
		Controls:  ctl,
		Bus:       h.Bus,
		SharedBus: h.SharedBus,
		Origin:    h.Origin,
		Streams:   h.Streams,
		Tools:     h.Tools,
		Log:       h.Log,
		Now:       h.Now,
		Started:   h.Started,
		Web:       h.Web,
		Config:    screens.Config{DataDir: h.Config.DataDir, BaseURL: h.Config.BaseURL, Demo: h.Config.Demo},
	}
}
