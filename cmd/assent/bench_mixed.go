package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mixedClients is how many MCP clients the mixed rows run at once.
const mixedClients = 100

// mixedName is the name of the mixed row, before its backend suffix.
var mixedName = fmt.Sprintf("mcp mixed stage+runtime_status+controls_inspect, %d clients", mixedClients)

// mixedOp returns the mixed load's operation for conc clients: each client
// calls controls_execute stage, runtime_status and controls_inspect in
// turn. On the floor the stage is the committing tool and the reads the
// trivial one.
//
// When stale is not nil, a stage that another node's stage of the same
// control overtook (stale_revision) counts as a decided call and is
// counted in stale.
func mixedOp(conc int, stale *atomic.Int64) mcpOp {
	stage := map[string]any{"action": "stage", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "value": "pro"}
	inspect := map[string]any{"identity": map[string]any{"formId": "profile", "controlId": "plan"}}
	// Each client counts its own calls, so no two touch one counter.
	turn := make([]int, conc)
	return func(ctx context.Context, w int, cs *mcp.ClientSession, floor string) error {
		k := turn[w] % 3
		turn[w]++
		name, args := "controls_execute", stage
		switch k {
		case 1:
			name, args = "runtime_status", map[string]any{}
		case 2:
			name, args = "controls_inspect", inspect
		}
		if floor != "" {
			name = floorTool
			if k == 0 {
				name = floorCommitTool
			}
		}
		_, err := callTool(ctx, cs, name, args)
		if err != nil && stale != nil && k == 0 && floor == "" && strings.Contains(err.Error(), `"stale_revision"`) {
			stale.Add(1)
			return nil
		}
		return err
	}
}

// mixedRow measures the mixed load from mixedClients clients on e.
func (e *benchEnv) mixedRow(ctx context.Context, name string) (benchRow, error) {
	return e.mcpRow(ctx, name, mixedClients, 0, floorCommitTool, mixedOp(mixedClients, nil))
}

// twoNodeMixedRow measures the mixed load with its clients split between
// e's server and second's, two nodes on one store, against e's floor.
func (e *benchEnv) twoNodeMixedRow(ctx context.Context, name string, second *benchEnv) (benchRow, error) {
	half := mixedClients / 2
	a1, close1, err := sessions(ctx, e.base+"/mcp", e.token, half)
	if err != nil {
		return benchRow{}, err
	}
	defer close1()
	a2, close2, err := sessions(ctx, second.base+"/mcp", second.token, mixedClients-half)
	if err != nil {
		return benchRow{}, err
	}
	defer close2()
	a := append(a1[:half:half], a2...)
	b, closeB, err := sessions(ctx, e.floor.base+"/mcp", "", mixedClients)
	if err != nil {
		return benchRow{}, err
	}
	defer closeB()
	var stale atomic.Int64
	op := mixedOp(mixedClients, &stale)
	side := func(ss []*mcp.ClientSession, floor string) func() (sample, error) {
		return func() (sample, error) {
			return batch(ctx, e.o.calls, mixedClients, e.o.batchTimeout, func(ctx context.Context, w int) error {
				return op(ctx, w, ss[w], floor)
			})
		}
	}
	r, err := compareRow(name, 0, e.o.rounds, side(a, ""), side(b, floorCommitTool))
	r.Note = fmt.Sprintf("clients split between two nodes on one database, floor on one; %d stages answered stale_revision (the other node's stage of the control won)", stale.Load())
	return r, err
}
