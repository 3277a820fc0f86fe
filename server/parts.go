package server

import (
	"github.com/assent-run/assent/server/asks"
	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/internal/host"
	notifypart "github.com/assent-run/assent/server/notify"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/server/rules"
	"github.com/assent-run/assent/server/runs"
	"github.com/assent-run/assent/server/screens"
)

// The parts' dependencies, taken from the host and the parts built before.

func controlsDeps(h *host.Host) controls.Deps {
	return controls.Deps{
		Gate: h,
		Store: controls.Stores{Audit: h.Store.Audit, ControlRegistry: h.Store.ControlRegistry, Settings: h.Store.Settings,
			Deadlines: h.Store.Backend.Deadlines(), Groups: h.Store.Backend.Groups()},
		Bus:       h.Bus,
		SharedBus: h.SharedBus,
		Origin:    h.Origin,
		Tools:     h.Tools,
		Log:       h.Log,
		Now:       h.Now,
		Web:       h.Web,
		Config:    controls.Config{BaseURL: h.Config.BaseURL, DecisionDeadline: h.Config.DecisionDeadlines[DeadlineProposal]},
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
		Config:    screens.Config{DataDir: h.Config.DataDir, BaseURL: h.Config.BaseURL},
	}
}

func runsDeps(h *host.Host) runs.Deps {
	st := h.Store
	return runs.Deps{
		Gate: h,
		Store: runs.Stores{Audit: st.Audit, Runs: st.Runs, Proposals: st.Proposals, Principals: st.Principals,
			Cluster: st.Backend.Cluster(), Backend: st.Backend, Deadlines: st.Backend.Deadlines()},
		Bus:       h.Bus,
		SharedBus: h.SharedBus,
		Tools:     h.Tools,
		Log:       h.Log,
		Now:       h.Now,
		Web:       h.Web,
		Config: runs.Config{DataDir: h.Config.DataDir, BaseURL: h.Config.BaseURL, RunUser: h.Config.RunUser,
			Node: h.Config.Node, LeaseTTL: h.Config.LeaseTTL, Network: h.Config.RunNetwork,
			DecisionDeadline: h.Config.DecisionDeadlines[DeadlineCommand]},
	}
}

func flowsDeps(h *host.Host, ctl flows.Controls, runs flows.Runs) flows.Deps {
	return flows.Deps{
		Gate: h,
		Store: flows.Stores{Principals: h.Store.Principals, Settings: h.Store.Settings, Flows: h.Store.Flows, Audit: h.Store.Audit,
			Deadlines: h.Store.Backend.Deadlines()},
		Controls: ctl,
		Runs:     runs,
		Bus:      h.Bus,
		Tools:    h.Tools,
		Log:      h.Log,
		Now:      h.Now,
		Web:      h.Web,
		Groups:   route.FlowGroups{Router: h.Router()},
		Config: flows.Config{DataDir: h.Config.DataDir, BaseURL: h.Config.BaseURL, Node: h.Config.Node,
			ProgramDeadline: h.Config.DecisionDeadlines[DeadlineProgram]},
	}
}

func notifyDeps(h *host.Host, ctl notifypart.ControlProposals) notifypart.Deps {
	st := h.Store
	return notifypart.Deps{
		Gate: h,
		Store: notifypart.Stores{Notify: st.Backend.Notify(), Proposals: st.Proposals, Flows: st.Flows,
			Principals: st.Principals, Settings: st.Settings, Sessions: st.Sessions, Asks: st.Backend.Asks(),
			Deadlines: st.Backend.Deadlines()},
		Controls:     ctl,
		Bus:          h.Bus,
		Log:          h.Log,
		Now:          h.Now,
		Web:          h.Web,
		BaseURL:      h.Config.BaseURL,
		Node:         h.Config.Node,
		Options:      h.Config.Notify,
		Router:       h.Router(),
		RemindBefore: h.Config.RemindBefore,
	}
}

func rulesDeps(h *host.Host, ctl rules.Controls) rules.Deps {
	return rules.Deps{
		Gate:     h,
		Store:    rules.Stores{Rules: h.Store.Backend.Rules(), Principals: h.Store.Principals, Settings: h.Store.Settings},
		Controls: ctl,
		Log:      h.Log,
		Now:      h.Now,
		Web:      h.Web,
	}
}

func asksDeps(h *host.Host) asks.Deps {
	return asks.Deps{
		Gate:   h,
		Asks:   h.Store.Backend.Asks(),
		Groups: h.Store.Backend.Groups(),
		Audit:  h.Store.Audit,
		Bus:    h.Bus,
		Tools:  h.Tools,
		Log:    h.Log,
		Now:    h.Now,
		Config: asks.Config{BaseURL: h.Config.BaseURL, DefaultDeadline: h.Config.DecisionDeadlines[DeadlineQuestion]},
	}
}
