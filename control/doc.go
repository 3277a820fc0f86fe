// Package control is a registry of the controls of an application's forms
// through which agents, people and programs inspect and operate them, with
// people keeping the final say over every change.
//
// # Model
//
// A control is addressed by its [Identity]: a form id, a control id and an
// optional [Subject] (the record it edits). An adapter registers each
// control with its [Metadata] (kind, label, sensitivity, options,
// constraints…) and small [Handles] that read and write the value, focus it
// and so on. The handles a control provides decide its capabilities, unless
// its metadata declares a list.
//
// [Registry.List] and [Registry.Get] return [Snapshot] values: identity,
// metadata, runtime state, the live value and, separately, the staged value.
// A secret or non-readable control is redacted: its snapshots, results and
// events never carry its value, its staged value or its validation message,
// and a secret control never offers read, stage, apply, clear or undo.
//
// # Commands
//
// [Registry.Execute] runs one [Command] for a [CommandContext] that says
// where it came from (user, voice, agent, tutorial or test) and whether a
// person confirmed it. The actions are focus, reveal, highlight, explain,
// validate, stage, apply, clear, undo and discard. Stage stores a proposal
// without touching the control; apply writes the command's value or the
// proposal; clear empties the control; undo restores what the newest apply
// or clear replaced; discard drops the proposal.
//
// An agent may inspect, point at and stage, but its apply, clear, undo and
// discard are always refused, whatever it claims about confirmation: with
// human_confirmation_required, or with a more specific reason such as
// sensitive_control when one applies. A person applies or discards the
// proposal. Every refusal comes back as a [Result]
// with a stable [Reason] and a message that says what to do.
//
// Proposals carry their provenance and a revision. A proposal whose
// control changed after staging is stale and cannot be applied
// (staged_value_stale), and an apply naming an older revision is refused
// (stale_revision). Undo refuses to overwrite an edit made after the change
// it would reverse. Each control keeps a bounded undo history.
//
// # Hosted forms and persistence
//
// [Registry.Host] registers the controls of a form whose values the
// registry holds itself, for an application written in another language;
// [Registry.SetHostedValue] records the person's own edits to them.
//
// By default everything lives in memory. With a [Persister] as
// [Config.Store], every change — a proposal staged or closed, an undo entry
// pushed or popped, a hosted form or value — is written through before it
// takes effect, and a command whose change cannot be saved is refused with
// store_unavailable with nothing changed. [Registry.Restore] rebuilds a new
// registry from what was saved: the same proposals (revisions, provenance,
// staleness), undo histories and hosted forms.
//
// # Events
//
// [Registry.Subscribe] delivers registered, unregistered, staged and
// command events. Delivery is asynchronous through a bounded queue per
// subscriber, so a slow or panicking subscriber never delays a command or
// changes its result. Events are live notifications, not an audit log; an
// application that needs one stores the command events itself.
//
// The registry performs no I/O of its own beyond its Persister and
// authenticates no one: the application owns authentication, authorization
// and any rollback outside the control.
package control
