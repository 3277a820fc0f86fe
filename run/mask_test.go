package run

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeChunks writes s to a Masker in pieces cut at cuts and returns
// what came out.
func writeChunks(s string, secrets []string, cuts []int) string {
	var b bytes.Buffer
	m := NewMasker(&b, secrets)
	prev := 0
	for _, c := range cuts {
		if c < prev || c > len(s) {
			continue
		}
		m.Write([]byte(s[prev:c]))
		prev = c
	}
	m.Write([]byte(s[prev:]))
	m.Close()
	return b.String()
}

func TestMaskerMasksAcrossWrites(t *testing.T) {
	const pin, token = "4711-pin", "asnt_run_abcdef0123456789"
	secrets := []string{pin, token}
	tests := []struct {
		name, in, want string
	}{
		{"whole", "pin is 4711-pin\n", "pin is [REDACTED]\n"},
		{"token and bearer", "Authorization: Bearer " + token + "\nx=" + token, "Authorization: Bearer [REDACTED]\nx=[REDACTED]"},
		{"bearer of an unknown token", "curl -H 'Authorization: bearer\tabc.def-ghi' x", "curl -H 'Authorization: bearer\t[REDACTED]' x"},
		{"across a line", "4711-\npin 4711-pin", "4711-\npin [REDACTED]"},
		{"prefix at the end", "ends with 4711-p", "ends with 4711-p"},
		{"twice in a row", "4711-pin4711-pin", "[REDACTED][REDACTED]"},
		{"bearer word then a word (masked, as the views do)", "the bearer of news", "the bearer [REDACTED] news"},
		{"not at a word start", "xBearer abc", "xBearer abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaskString(tt.in, secrets); got != tt.want {
				t.Errorf("whole: %q, want %q", got, tt.want)
			}
			// Every way of cutting the input in two and in three gives
			// the same output.
			for i := 0; i <= len(tt.in); i++ {
				if got := writeChunks(tt.in, secrets, []int{i}); got != tt.want {
					t.Fatalf("cut at %d: %q, want %q", i, got, tt.want)
				}
				for j := i; j <= len(tt.in); j++ {
					if got := writeChunks(tt.in, secrets, []int{i, j}); got != tt.want {
						t.Fatalf("cut at %d and %d: %q, want %q", i, j, got, tt.want)
					}
				}
			}
		})
	}
}

// A secret that begins another, shorter one never lets the longer one's
// tail out, wherever the output is cut.
func TestMaskerLongerSecretFirst(t *testing.T) {
	secrets := []string{"ab", "abSECRETLONG"}
	in := "x ab abSECRETLONG y"
	want := "x [REDACTED] [REDACTED] y"
	for i := 0; i <= len(in); i++ {
		if got := writeChunks(in, secrets, []int{i}); got != want {
			t.Fatalf("cut at %d: %q, want %q", i, got, want)
		}
	}
}

// Written one byte at a time, a secret still never comes out, and nothing
// else is lost.
func TestMaskerByteByByte(t *testing.T) {
	secret := "s3cr3t-value"
	in := strings.Repeat("line with s3cr3t-value and s3cr3t-valu\n", 50)
	var cuts []int
	for i := range len(in) {
		cuts = append(cuts, i)
	}
	got := writeChunks(in, []string{secret}, cuts)
	if strings.Contains(got, secret) {
		t.Fatal("the secret came out")
	}
	if want := strings.ReplaceAll(in, secret, "[REDACTED]"); got != want {
		t.Fatalf("got %q, want %q", got[:80], want[:80])
	}
}

func FuzzMasker(f *testing.F) {
	f.Add("pin 1234 and Bearer abc.def\n", "1234", 3, 9)
	f.Add("Bearer", "Bearer x", 2, 4)
	f.Add("aaaa", "aa", 1, 3)
	f.Add("x[REDACTED]y", "ED]", 0, 5)
	f.Fuzz(func(t *testing.T, in, secret string, i, j int) {
		if len(in) > 4096 || len(secret) > 64 {
			return
		}
		whole := MaskString(in, []string{secret})
		if got := writeChunks(in, []string{secret}, []int{i, j}); got != whole {
			t.Fatalf("cut at %d, %d: %q; in one write %q", i, j, got, whole)
		}
		// A secret that cannot be made of the marker and what is around
		// it never comes out.
		if len(secret) >= maskMinLen && !strings.ContainsAny(secret, "[]REDACT") && strings.Contains(whole, secret) {
			t.Fatalf("secret %q came out of %q: %q", secret, in, whole)
		}
	})
}

// A Run's output reaches its logs and the Trace view with the values of
// its secret arguments (an operator's secret default under set -x
// included), the values a caller named secret (a Flow's secret
// parameters), its run token and bearer tokens masked, also when a secret
// is written in two pieces, and also when the Run starts without
// namespaces of its own, where no init stands between the process and its
// logs.
func TestRunOutputMaskedWithAndWithoutNamespaces(t *testing.T) {
	for _, isolated := range []bool{true, false} {
		t.Run(map[bool]string{true: "namespaces", false: "no namespaces"}[isolated], func(t *testing.T) {
			f := newFixture(t)
			f.m.Close()
			f.m = f.openWith(Config{Tokens: &fakeTokens{}})
			if isolated {
				needIsolation(t, f.m)
			} else {
				f.m.iso = nil // as when namespaces cannot be made
			}
			const pin, operatorKey, flowParam = "pin-4711-0815", "op-key-31337", "flow-param-2718"
			def := []byte(`{"args":["pin:string!secret","key:string!secret=` + operatorKey + `","param:string","who:string"],"template":[` +
				`"echo pin={pin} who={who}",` +
				`"printf '%s' {pin} | head -c 6; sleep 0.2; printf '%s\\n' {pin} | tail -c +7",` +
				`"printf 'token %s\\n' \"$ASSENT_RUN_TOKEN\"",` +
				`"echo 'Authorization: Bearer abc.DEF-123' >&2",` +
				`"set -x; curl_like --key {key} --param {param}; : {pin}",` +
				`"printf 'p=%s\\n' {param}"]}`)
			r, err := DecodeRecipe(def)
			if err != nil {
				t.Fatal(err)
			}
			vals := map[string]json.RawMessage{"pin": json.RawMessage(strconv.Quote(pin)), "who": json.RawMessage(`"ann"`),
				"param": json.RawMessage(strconv.Quote(flowParam))}
			if _, err := f.m.Spawn(context.Background(), "alice", SpawnRequest{Definition: r, RunID: "masked", Values: vals, Secret: []string{"param"}}); err != nil {
				t.Fatal(err)
			}
			f.waitEnded("masked")
			out, _ := f.m.Logs(context.Background(), "alice", "masked", "stdout", 0)
			errOut, _ := f.m.Logs(context.Background(), "alice", "masked", "stderr", 0)
			all := out + errOut
			for _, leak := range []string{pin, operatorKey, flowParam, "secret-masked", "abc.DEF-123"} {
				if strings.Contains(all, leak) {
					t.Errorf("the logs show %q:\n%s", leak, all)
				}
			}
			for _, want := range []string{"who=ann", "pin=[REDACTED]", "token [REDACTED]", "p=[REDACTED]"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout = %q; want %q", out, want)
				}
			}
			// The split value came in two writes 200ms apart; the pieces
			// alone are not the secret, so only the whole is masked.
			if !strings.Contains(out, "\n[REDACTED]\n") {
				t.Errorf("the value written in two pieces is not masked: %q", out)
			}
			if !strings.Contains(errOut, "--key [REDACTED]") || !strings.Contains(errOut, "Bearer [REDACTED]") {
				t.Errorf("stderr = %q; want set -x's trace and the bearer token masked", errOut)
			}
			v, err := f.m.Inspect(context.Background(), "alice", InspectRequest{Target: "run:masked", View: "trace"})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			for _, leak := range []string{pin, operatorKey, flowParam, "abc.DEF-123"} {
				if strings.Contains(string(b), leak) {
					t.Errorf("the Trace view shows %q", leak)
				}
			}
		})
	}
}

// Without namespaces the relay that masks a Run's output is a process of
// its own, not a part of the Manager: a Run that goes on writing after
// its Manager closed (as after a server restart) still writes through it,
// masked, and is not ended by a closed pipe.
func TestRelayOutlivesManager(t *testing.T) {
	f := newFixture(t)
	f.m.iso = nil // as when namespaces cannot be made
	const pin = "pin-relay-5521"
	r, err := DecodeRecipe([]byte(`{"args":["pin:string!secret"],"template":"sleep 0.5; echo after={pin}; echo end"}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.m.Spawn(context.Background(), "alice", SpawnRequest{Definition: r, RunID: "outlive", Values: map[string]json.RawMessage{"pin": json.RawMessage(strconv.Quote(pin))}})
	if err != nil {
		t.Fatal(err)
	}
	f.m.Close()
	f.m = f.open() // re-adopts the Run and records its end
	f.waitEnded("outlive")
	b, err := os.ReadFile(filepath.Join(v.StateDir, "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "after=[REDACTED]\nend\n" {
		t.Fatalf("stdout.log = %q; want the output written after the Manager closed, masked", got)
	}
	if code := f.waitEnded("outlive").ExitCode; code == nil || *code != 0 {
		t.Fatalf("exit code %v; want 0", code)
	}
}
