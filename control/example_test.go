package control_test

import (
	"context"
	"fmt"

	"github.com/assent-run/assent/control"
)

// An agent proposes a new display name; the agent cannot apply it, a person
// can, and the person can undo it.
func Example() {
	ctx := context.Background()
	reg := control.New(control.Config{})

	name := control.Identity{FormID: "profile", ControlID: "displayName"}
	value := control.NewValue("Willow Reed")
	if _, err := reg.Register(control.Registration{
		Identity: name,
		Metadata: control.Metadata{Kind: control.KindText, Label: "Display name"},
		Handles:  value.Handles(),
	}); err != nil {
		panic(err)
	}

	agent := control.CommandContext{Source: control.SourceAgent, PrincipalID: "agent-7"}
	person := control.CommandContext{Source: control.SourceUser, Confirmed: true, PrincipalID: "willow"}

	res := reg.Execute(ctx, control.Command{Action: control.Stage, Identity: name, Value: "Willow Griffin"}, agent)
	fmt.Println("agent stage:", res.OK, "live:", res.Snapshot.State.Value, "proposed:", res.Snapshot.State.StagedValue)

	res = reg.Execute(ctx, control.Command{Action: control.Apply, Identity: name}, agent)
	fmt.Println("agent apply:", res.Reason)

	for _, p := range reg.Proposals(ctx, "profile") {
		fmt.Printf("inbox: %s -> %v (revision %d, by %s)\n", p.Metadata.Label, p.State.StagedValue, p.State.Staged.Revision, p.State.Staged.Provenance.PrincipalID)
	}

	res = reg.Execute(ctx, control.Command{Action: control.Apply, Identity: name, Revision: 1}, person)
	fmt.Println("person apply:", res.OK, "live:", value.Load())

	res = reg.Execute(ctx, control.Command{Action: control.Undo, Identity: name}, person)
	fmt.Println("person undo:", res.OK, "live:", value.Load())
	// Output:
	// agent stage: true live: Willow Reed proposed: Willow Griffin
	// agent apply: human_confirmation_required
	// inbox: Display name -> Willow Griffin (revision 1, by agent-7)
	// person apply: true live: Willow Griffin
	// person undo: true live: Willow Reed
}

// A secret control never shows its value and refuses every change.
func ExampleRegistry_Get_secret() {
	ctx := context.Background()
	reg := control.New(control.Config{})
	key := control.Identity{FormID: "profile", ControlID: "apiKey"}
	_, _ = reg.Register(control.Registration{
		Identity: key,
		Metadata: control.Metadata{Kind: control.KindPassword, Label: "API key", Sensitivity: control.Secret},
		Handles:  control.NewValue("sk-live-123").Handles(),
	})

	snap, _ := reg.Get(ctx, key)
	fmt.Println("redacted:", snap.State.ValueRedacted, "value:", snap.State.Value)
	fmt.Println("capabilities:", snap.Metadata.Capabilities)

	res := reg.Execute(ctx, control.Command{Action: control.Stage, Identity: key, Value: "sk-other"}, control.CommandContext{Source: control.SourceAgent})
	fmt.Println("stage:", res.Reason)
	// Output:
	// redacted: true value: <nil>
	// capabilities: [explain]
	// stage: sensitive_control
}

// A proposal becomes stale when the person edits the control after it was
// staged; applying it is refused until it is staged again.
func ExampleRegistry_Execute_stale() {
	ctx := context.Background()
	reg := control.New(control.Config{})
	id := control.Identity{FormID: "order", ControlID: "quantity"}
	qty := control.NewValue(1)
	_, _ = reg.Register(control.Registration{Identity: id, Metadata: control.Metadata{Kind: control.KindNumber}, Handles: qty.Handles()})

	reg.Execute(ctx, control.Command{Action: control.Stage, Identity: id, Value: 5}, control.CommandContext{Source: control.SourceAgent})
	qty.Store(2) // the person types 2 meanwhile

	res := reg.Execute(ctx, control.Command{Action: control.Apply, Identity: id}, control.CommandContext{})
	fmt.Println(res.Reason, "stale:", res.Snapshot.State.Staged.Stale, "live:", qty.Load())
	// Output:
	// staged_value_stale stale: true live: 2
}

// A policy narrows what the default policy allows, here refusing values
// from anyone but a person on a billing form.
func ExampleConfig_policy() {
	ctx := context.Background()
	reg := control.New(control.Config{
		Policy: func(_ context.Context, cmd control.Command, cc control.CommandContext, _ control.Snapshot) control.Decision {
			if cmd.Identity.FormID == "billing" && cmd.Action.IsMutation() && cc.Source != control.SourceUser {
				return control.Decision{Reason: "billing_people_only", Message: "only a person may propose billing changes"}
			}
			return control.Decision{Allowed: true}
		},
	})
	plan := control.Identity{FormID: "billing", ControlID: "plan"}
	_, _ = reg.Register(control.Registration{Identity: plan, Metadata: control.Metadata{Kind: control.KindSelect}, Handles: control.NewValue("free").Handles()})

	res := reg.Execute(ctx, control.Command{Action: control.Stage, Identity: plan, Value: "pro"}, control.CommandContext{Source: control.SourceAgent})
	fmt.Println(res.Reason)
	// Output:
	// billing_people_only
}

// Subscribers receive events asynchronously, in order.
func ExampleRegistry_Subscribe() {
	ctx := context.Background()
	reg := control.New(control.Config{})
	done := make(chan struct{})
	stop := reg.Subscribe(func(e control.Event) {
		if e.Type == control.EventCommand {
			fmt.Println(e.Seq, e.Type, e.Command.Action, e.Context.Source, e.Result.OK)
			close(done)
			return
		}
		fmt.Println(e.Seq, e.Type, e.Identity)
	})
	defer stop()

	id := control.Identity{FormID: "profile", ControlID: "email"}
	_, _ = reg.Register(control.Registration{Identity: id, Metadata: control.Metadata{Kind: control.KindEmail}, Handles: control.NewValue("").Handles()})
	reg.Execute(ctx, control.Command{Action: control.Stage, Identity: id, Value: "ada@example.com"}, control.CommandContext{Source: control.SourceAgent})
	<-done
	// Output:
	// 1 registered profile/email
	// 2 staged profile/email
	// 3 command stage agent true
}

// The inbox lists the changes a person can still undo, newest first, and
// shows when undoing would overwrite a later edit.
func ExampleRegistry_Changes() {
	ctx := context.Background()
	reg := control.New(control.Config{})
	plan := control.Identity{FormID: "billing", ControlID: "plan"}
	value := control.NewValue("free")
	_, _ = reg.Register(control.Registration{
		Identity: plan,
		Metadata: control.Metadata{Kind: control.KindSelect, Label: "Plan"},
		Handles:  value.Handles(),
	})
	person := control.CommandContext{Source: control.SourceUser, Confirmed: true, PrincipalID: "ada"}
	reg.Execute(ctx, control.Command{Action: control.Apply, Identity: plan, Value: "pro"}, person)

	for _, c := range reg.Changes(ctx, "") {
		fmt.Printf("%s: %v -> %v by %s, stale %v\n", c.Label, c.Previous, c.Applied, c.Provenance.PrincipalID, c.Stale)
	}
	value.Store("team") // edited afterwards, outside the registry
	res := reg.Execute(ctx, control.Command{Action: control.Undo, Identity: plan}, person)
	fmt.Println(res.Reason, value.Load())
	// Output:
	// Plan: free -> pro by ada, stale false
	// staged_value_stale team
}
