//go:build ignore

// gen compiles the view's engine to WebAssembly and copies the toolchain's
// loader beside it: go generate ./screen/view
package main

import (
	"bytes"
	"compress/gzip"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	tmp, err := os.MkdirTemp("", "assent-view-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "engine.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./engine")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("building the engine: %v", err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		log.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(wasm)
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("engine.wasm.gz", gz.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	goroot := strings.TrimSpace(run("go", "env", "GOROOT"))
	loader, err := os.ReadFile(filepath.Join(goroot, "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("wasm_exec.js", loader, 0o644); err != nil {
		log.Fatal(err)
	}
	version := strings.TrimSpace(run("go", "env", "GOVERSION"))
	if version == "" {
		version = runtime.Version()
	}
	if err := os.WriteFile("engine.version", []byte(version+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("engine: %d bytes, %d gzipped (%s)", len(wasm), gz.Len(), version)
}

func run(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		log.Fatalf("%s %v: %v", name, args, err)
	}
	return string(b)
}
