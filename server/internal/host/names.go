package host

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
)

func (s *Host) PrincipalNames(ctx context.Context) map[string]string {
	ps, err := s.Store.ListPrincipals(ctx)
	names := map[string]string{}
	if err != nil {
		return names
	}
	for _, p := range ps {
		names[p.ID] = p.Name
	}
	return names
}

func NameOr(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	if id == "" {
		return "someone"
	}
	return id
}

// DisplayValue renders a value for people as plain text.
func DisplayValue(v any, redacted bool) string {
	if redacted {
		return "(hidden)"
	}
	switch x := v.(type) {
	case nil:
		return "(empty)"
	case string:
		if x == "" {
			return "(empty)"
		}
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func JoinOr(list []string, empty string) string {
	if len(list) == 0 {
		return empty
	}
	out := list[0]
	for _, s := range list[1:] {
		out += ", " + s
	}
	return out
}

// ClientIP is the peer's address. No proxy header is trusted.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Fingerprint identifies a request's tool and params (json.Marshal sorts
// object keys, so key order does not matter).
func Fingerprint(name string, params map[string]any) [32]byte {
	b, _ := json.Marshal(params)
	return sha256.Sum256(append([]byte(name+"\x00"), b...))
}
