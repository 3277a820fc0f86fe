package host

import (
	"bytes"
	"flag"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

//go:generate go test -run TestAppIcons -update-icons

var updateIcons = flag.Bool("update-icons", false, "redraw the web app's icons in static/")

// accent is the CSS's --accent colour, the icons' background.
var accent = color.NRGBA{0x0b, 0x57, 0xd0, 0xff}

// appIcon draws the app's mark, a white tick, on an accent square of side
// size. A maskable icon fills the whole square (the platform cuts its own
// shape) and keeps the tick inside the central safe circle; the plain
// icon has rounded corners.
func appIcon(size int, maskable bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	s := float64(size)
	// The tick's two strokes, in units of the side.
	scale := 1.0
	if maskable {
		scale = 0.7
	}
	pt := func(x, y float64) [2]float64 {
		return [2]float64{(0.5 + (x-0.5)*scale) * s, (0.5 + (y-0.5)*scale) * s}
	}
	a, b, c := pt(0.27, 0.52), pt(0.43, 0.68), pt(0.74, 0.34)
	width := 0.065 * s * scale
	radius := 0.18 * s
	const n = 4 // samples per axis and pixel
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			var bg, fg int
			for j := 0; j < n; j++ {
				for i := 0; i < n; i++ {
					px := float64(x) + (float64(i)+0.5)/n
					py := float64(y) + (float64(j)+0.5)/n
					if !maskable && !inRoundedSquare(px, py, s, radius) {
						continue
					}
					bg++
					if segDist(px, py, a, b) <= width || segDist(px, py, b, c) <= width {
						fg++
					}
				}
			}
			if bg == 0 {
				continue
			}
			// Mix white over the accent by the tick's coverage.
			f := float64(fg) / float64(bg)
			mix := func(v uint8) uint8 { return uint8(math.Round(float64(v)*(1-f) + 255*f)) }
			img.SetNRGBA(x, y, color.NRGBA{mix(accent.R), mix(accent.G), mix(accent.B), uint8(bg * 255 / (n * n))})
		}
	}
	return img
}

func inRoundedSquare(x, y, s, r float64) bool {
	cx := math.Max(r, math.Min(s-r, x))
	cy := math.Max(r, math.Min(s-r, y))
	return math.Hypot(x-cx, y-cy) <= r
}

// segDist is the distance from (x, y) to the segment p–q.
func segDist(x, y float64, p, q [2]float64) float64 {
	dx, dy := q[0]-p[0], q[1]-p[1]
	t := ((x-p[0])*dx + (y-p[1])*dy) / (dx*dx + dy*dy)
	t = math.Max(0, math.Min(1, t))
	return math.Hypot(x-(p[0]+t*dx), y-(p[1]+t*dy))
}

var appIcons = []struct {
	file     string
	size     int
	maskable bool
}{
	{"icon-192.png", 192, false},
	{"icon-512.png", 512, false},
	{"icon-maskable-512.png", 512, true},
}

// TestAppIcons checks that the committed icons are the ones appIcon draws
// (compared pixel by pixel, so a change of the PNG encoder does not
// matter); with -update-icons it writes them.
func TestAppIcons(t *testing.T) {
	for _, ic := range appIcons {
		want := appIcon(ic.size, ic.maskable)
		file := filepath.Join("static", ic.file)
		if *updateIcons {
			var buf bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, want); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go generate in server/internal/host)", err)
		}
		got, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got.Bounds() != want.Bounds() {
			t.Fatalf("%s is %v, want %v", file, got.Bounds(), want.Bounds())
		}
		for y := 0; y < ic.size; y++ {
			for x := 0; x < ic.size; x++ {
				if color.NRGBAModel.Convert(got.At(x, y)) != want.NRGBAAt(x, y) {
					t.Fatalf("%s differs from the drawing at (%d, %d); run go generate in server/internal/host", file, x, y)
				}
			}
		}
	}
}
