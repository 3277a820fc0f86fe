package screen

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// perfScreen builds the reference performance screen: a root Stack of
// groups of 200 Text rows, and a governed Pay button. It returns the lines,
// each with its line ending.
func perfScreen(components int) [][]byte {
	groups := (components + 199) / 200
	var lines [][]byte
	add := func(format string, args ...any) { lines = append(lines, []byte(fmt.Sprintf(format, args...)+"\n")) }
	ids := make([]string, 0, groups+1)
	for g := 0; g < groups; g++ {
		ids = append(ids, fmt.Sprintf("g%d", g))
	}
	ids = append(ids, "pay")
	add("root = Stack([%s])", strings.Join(ids, ", "))
	n := 0
	for g := 0; g < groups; g++ {
		rows := make([]string, 0, 200)
		for r := 0; r < 200 && n < components; r++ {
			rows = append(rows, fmt.Sprintf("t%d", n))
			n++
		}
		add("g%d = Stack([%s])", g, strings.Join(rows, ", "))
		for _, id := range rows {
			add("%s = Text(\"Row %s\", tone=\"muted\")", id, id[1:])
		}
	}
	add("$amount = 42.5")
	add("pay = Button(\"Pay\", action=\"pay\")")
	add("payM = McpMutation(pay, tool=\"payments.confirm\", params={amount: $amount, note: \"\"})")
	return lines
}

func perfOptions() Options {
	// The stream format allows 1,000 components; the measurement raises the
	// limit so that every line is accepted and checked in full.
	return Options{Tools: []string{"payments.confirm"}, MaxComponents: 1 << 20}
}

func TestPerfScreenIsClean(t *testing.T) {
	p := NewParser(perfOptions())
	for _, l := range perfScreen(5000) {
		_, _ = p.Write(l)
	}
	doc := p.End()
	if len(doc.Issues()) != 0 {
		t.Fatalf("issues: %v", doc.Issues()[:min(5, len(doc.Issues()))])
	}
	if got := len(doc.Nodes()); got != 5000+25+2 {
		t.Errorf("%d nodes", got)
	}
}

// BenchmarkPerfScreen feeds the reference screen line by line, then ends it.
func BenchmarkPerfScreen(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		lines := perfScreen(n)
		size := 0
		for _, l := range lines {
			size += len(l)
		}
		b.Run(fmt.Sprintf("components=%d", n), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			opts := perfOptions()
			start := cpuTime()
			for b.Loop() {
				p := NewParser(opts)
				for _, l := range lines {
					_, _ = p.Write(l)
				}
				p.End()
			}
			reportCPU(b, start)
		})
	}
}

// BenchmarkLargeStream measures throughput on one large stream written in
// 4 KiB chunks: the 20,000-component screen, about 1 MB.
func BenchmarkLargeStream(b *testing.B) {
	var buf []byte
	for _, l := range perfScreen(20000) {
		buf = append(buf, l...)
	}
	b.SetBytes(int64(len(buf)))
	opts := perfOptions()
	start := cpuTime()
	for b.Loop() {
		p := NewParser(opts)
		for i := 0; i < len(buf); i += 4096 {
			_, _ = p.Write(buf[i:min(i+4096, len(buf))])
		}
		p.End()
	}
	reportCPU(b, start)
}

// BenchmarkLargeStreamNodes is BenchmarkLargeStream followed by reading
// every node, which builds their Props maps: the whole cost of a screen
// that is shown.
func BenchmarkLargeStreamNodes(b *testing.B) {
	var buf []byte
	for _, l := range perfScreen(20000) {
		buf = append(buf, l...)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	opts := perfOptions()
	start := cpuTime()
	for b.Loop() {
		p := NewParser(opts)
		for i := 0; i < len(buf); i += 4096 {
			_, _ = p.Write(buf[i:min(i+4096, len(buf))])
		}
		p.End().Nodes()
	}
	reportCPU(b, start)
}

// reportCPU adds the process CPU time per operation (GC included), a figure
// that other load on the machine does not inflate the way it does wall time.
func reportCPU(b *testing.B, start time.Duration) {
	if d := cpuTime() - start; d > 0 && b.N > 0 {
		b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
}

// BenchmarkByteAtATime is the worst chunking: one byte per write.
func BenchmarkByteAtATime(b *testing.B) {
	var buf []byte
	for _, l := range perfScreen(1000) {
		buf = append(buf, l...)
	}
	b.SetBytes(int64(len(buf)))
	opts := perfOptions()
	for b.Loop() {
		p := NewParser(opts)
		for i := range buf {
			_, _ = p.Write(buf[i : i+1])
		}
		p.End()
	}
}

// BenchmarkDefaultLimits feeds the 1,000-component screen with the format's
// own limits, as a client does.
func BenchmarkDefaultLimits(b *testing.B) {
	lines := perfScreen(990)
	opts := Options{Tools: []string{"payments.confirm"}}
	for b.Loop() {
		p := NewParser(opts)
		for _, l := range lines {
			_, _ = p.Write(l)
		}
		p.End()
	}
}

func BenchmarkDescribe(b *testing.B) {
	p := NewParser(perfOptions())
	for _, l := range perfScreen(5000) {
		_, _ = p.Write(l)
	}
	doc := p.End()
	for b.Loop() {
		Describe(doc, false)
	}
}

func BenchmarkUpdate(b *testing.B) {
	p := NewParser(perfOptions())
	for _, l := range perfScreen(1000) {
		_, _ = p.Write(l)
	}
	p.End()
	for b.Loop() {
		if res, _ := p.Update("t5 = Text(\"Row 5 changed\")\n$amount = 43\n"); !res.Applied {
			b.Fatal(res.Issues)
		}
	}
}
