// Command player is an example Run service: a player that ticks while
// playing and accepts the pause, resume and status Controls its Recipe
// declares, reporting each change through the Run's Trace.
//
// Build it, copy the Recipe into the data directory and spawn it:
//
//	go build -o /tmp/player ./examples/runs/player
//	cp examples/runs/recipes/player.json ~/.local/share/assent/recipes/
//	assent run spawn --recipe player --id player --set bin=/tmp/player
//	assent run control player pause
//	assent run inspect player --view trace
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/assent-run/assent/run/service"
)

func main() {
	interval := flag.Duration("interval", 2*time.Second, "time between ticks")
	flag.Parse()

	svc, err := service.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	p := &player{svc: svc, playing: true}
	p.emit(ctx, "player.started", "Player started", "notify")

	// Controls are handled on the Serve goroutine; the ticker on this one.
	controls := make(chan service.Control)
	done := make(chan error, 1)
	go func() {
		done <- svc.Serve(ctx, func(ctx context.Context, c service.Control) error {
			select {
			case controls <- c:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			return
		case err := <-done:
			log.Fatal(err)
		case <-t.C:
			if p.playing {
				p.tick++
				p.emit(ctx, "player.tick", fmt.Sprintf("tick %d", p.tick), "")
			}
		case c := <-controls:
			switch c.Action {
			case "pause":
				p.playing = false
				p.emit(ctx, "player.paused", fmt.Sprintf("Paused at tick %d", p.tick), "")
			case "resume":
				p.playing = true
				p.emit(ctx, "player.resumed", fmt.Sprintf("Resumed at tick %d", p.tick), "")
			case "status":
				p.emit(ctx, "player.status", fmt.Sprintf("playing=%v tick=%d", p.playing, p.tick), "notify")
			}
		}
	}
}

type player struct {
	svc     *service.Service
	playing bool
	tick    int
}

func (p *player) emit(ctx context.Context, kind, summary, attention string) {
	data, _ := json.Marshal(map[string]any{"playing": p.playing, "tick": p.tick})
	if err := p.svc.Emit(ctx, service.Event{Kind: kind, Summary: summary, Data: data, Attention: attention}); err != nil {
		log.Printf("emit %s: %v", kind, err)
	}
}
