package screens_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store/sqlite"
)

// BenchmarkLiveFeed1000Subscribers follows one live screen from 1,000
// /api/live subscribers over loopback HTTP while the application applies 10
// updates a second for 3 seconds, and reports the p50 and p99 delivery
// latency (from before the update is applied until a subscriber has read
// it) and the memory each subscriber holds (both ends of its connection).
// Run it once: go test -run '^$' -bench LiveFeed -benchtime=1x ./server/
func BenchmarkLiveFeed1000Subscribers(b *testing.B) {
	const (
		subscribers = 1000
		rate        = 10
		duration    = 3 * time.Second
	)
	ctx := context.Background()
	dir := b.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db, RateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer hs.CloseClientConnections()
	id, err := srv.Screens().Show(ctx, boot.Agent, "root = Card([status])\n$s = \"0\"\nstatus = Text($s)\n", screens.Options{})
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: subscribers, MaxConnsPerHost: 0}}

	for b.Loop() {
		var sent sync.Map // seq → time.Time
		var mu sync.Mutex
		var lat []time.Duration
		var ready, finished sync.WaitGroup
		want := int64(duration / time.Second * rate)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		cctx, cancel := context.WithCancel(ctx)
		sc, _ := screens.ScreenFor(srv.Screens(), context.Background(), boot.Agent, id)
		start := sc.Seq()
		ready.Add(subscribers)
		finished.Add(subscribers)
		for range subscribers {
			go func() {
				defer finished.Done()
				req, _ := http.NewRequestWithContext(cctx, "GET", fmt.Sprintf("%s/api/live?screen=%s&after=%d", hs.URL, id, start), nil)
				req.Header.Set("Authorization", "Bearer "+boot.AgentToken)
				resp, err := client.Do(req)
				ready.Done()
				if err != nil {
					return
				}
				defer resp.Body.Close()
				rd := bufio.NewReader(resp.Body)
				var mine []time.Duration
				for int64(len(mine)) < want {
					line, err := rd.ReadString('\n')
					if err != nil {
						break
					}
					if !strings.HasPrefix(line, "data: ") {
						continue
					}
					var u screens.LiveUpdate
					if json.Unmarshal([]byte(line[6:]), &u) != nil {
						continue
					}
					if t0, ok := sent.Load(u.Seq); ok {
						mine = append(mine, time.Since(t0.(time.Time)))
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		ready.Wait()
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		tick := time.NewTicker(time.Second / rate)
		for i := int64(1); i <= want; i++ {
			<-tick.C
			sent.Store(start+i, time.Now())
			if res, err := srv.Screens().Update(ctx, id, fmt.Sprintf("$s = \"%d\"", i)); err != nil || !res.Applied {
				b.Fatalf("update %d: %v %+v", i, err, res)
			}
		}
		tick.Stop()
		done := make(chan struct{})
		go func() { finished.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		cancel()
		<-done
		if len(lat) == 0 {
			b.Fatal("no update was delivered")
		}
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(len(lat))/float64(subscribers*want)*100, "%delivered")
		mem := int64(during.HeapInuse+during.StackInuse) - int64(before.HeapInuse+before.StackInuse)
		b.ReportMetric(float64(mem)/subscribers/1024, "KiB/subscriber")
	}
}
