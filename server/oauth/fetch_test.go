package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestCheckPublic(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1", "169.254.169.254",
		"172.16.0.1", "192.0.0.8", "192.168.1.1", "198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:100.64.0.1", "::127.0.0.1", "fe80::1", "fd00::1", "fec0::1", "ff02::1", "ff0e::1",
		"64:ff9b::a00:1", "64:ff9b::7f00:1", "64:ff9b::6440:1", "64:ff9b::c612:1", "64:ff9b:1::1",
		"2002:a00:1::1", "2002:7f00:1::", "2002:6440:1::1", "2002:c0a8:101::1", "2001::1", "2001:db8::1", "fe80::1%eth0",
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "100.128.0.1", "198.20.0.1", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"}
	for _, s := range refused {
		if err := checkPublic(netip.MustParseAddr(s)); err == nil {
			t.Errorf("checkPublic(%s) = nil, want refused", s)
		}
	}
	for _, s := range allowed {
		if err := checkPublic(netip.MustParseAddr(s)); err != nil {
			t.Errorf("checkPublic(%s) = %v, want allowed", s, err)
		}
	}
}

type fakeResolver struct {
	calls atomic.Int32
	addrs []string
}

func (f *fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	f.calls.Add(1)
	var out []netip.Addr
	for _, a := range f.addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

var errNoNetwork = errors.New("test dials nothing")

// TestPublicDialer: a name is resolved once and the address checked is
// the one dialed; a name with any address that is not public is refused.
func TestPublicDialer(t *testing.T) {
	var dialed []string
	d := &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		dialed = append(dialed, address)
		return errNoNetwork
	}}
	r := &fakeResolver{addrs: []string{"203.0.114.5"}}
	_, err := publicDialer{resolve: r, dialer: d}.DialContext(t.Context(), "tcp", "client.example:443")
	if !errors.Is(err, errNoNetwork) || r.calls.Load() != 1 || len(dialed) != 1 || dialed[0] != "203.0.114.5:443" {
		t.Errorf("dial: %v, %d lookups, dialed %v; want one lookup and 203.0.114.5:443", err, r.calls.Load(), dialed)
	}
	for _, addrs := range [][]string{{"127.0.0.1"}, {"8.8.8.8", "100.64.0.1"}, {"64:ff9b::a9fe:a9fe"}} {
		dialed = nil
		r := &fakeResolver{addrs: addrs}
		if _, err := (publicDialer{resolve: r, dialer: d}).DialContext(t.Context(), "tcp", "rebind.example:443"); err == nil || errors.Is(err, errNoNetwork) || len(dialed) != 0 {
			t.Errorf("name resolving to %v: %v, dialed %v; want refused before dialing", addrs, err, dialed)
		}
	}
	if _, err := (publicDialer{resolve: r, dialer: d}).DialContext(t.Context(), "tcp", "[::1]:443"); err == nil || errors.Is(err, errNoNetwork) {
		t.Errorf("literal loopback: %v, want refused", err)
	}
}

// TestDocumentCacheAndLimit: a document is fetched once while its
// max-age lasts; a flood of distinct documents on one host is cut off by
// the host's limit.
func TestDocumentCacheAndLimit(t *testing.T) {
	var hits atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if strings.HasPrefix(r.URL.Path, "/cached") {
			w.Header().Set("Cache-Control", "public, max-age=600")
		} else {
			w.Header().Set("Cache-Control", "no-store")
		}
		json.NewEncoder(w).Encode(map[string]any{"client_id": srv.URL + r.URL.Path, "redirect_uris": []string{"http://127.0.0.1:1/cb"}})
	}))
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Server{h: Deps{Now: func() time.Time { return now }}, opt: Options{InsecureClientIDs: true}, fetch: newFetchClient(true, nil), docs: newDocCache()}
	for range 4 {
		if _, err := s.fetchClient(t.Context(), srv.URL+"/cached.json"); err != nil {
			t.Fatal(err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("a cached document was fetched %d times, want 1", n)
	}
	now = now.Add(11 * time.Minute)
	if _, err := s.fetchClient(t.Context(), srv.URL+"/cached.json"); err != nil || hits.Load() != 2 {
		t.Errorf("after max-age: %v, %d fetches; want a second fetch", err, hits.Load())
	}
	hits.Store(0)
	refused := 0
	for i := range 50 {
		_, err := s.fetchClient(t.Context(), srv.URL+"/flood/"+string(rune('a'+i%26))+strings.Repeat("x", i))
		var oe *oauthError
		if errors.As(err, &oe) && oe.code == "temporarily_unavailable" {
			refused++
		}
	}
	if n := hits.Load(); n > hostFetchBurst {
		t.Errorf("a flood of 50 documents on one host made %d fetches, want at most %d", n, hostFetchBurst)
	}
	if refused < 50-hostFetchBurst {
		t.Errorf("%d of 50 flood requests refused as temporarily_unavailable", refused)
	}
}

func TestCacheLifetime(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"": docCacheDefault, "max-age=60": time.Minute, "public, max-age=999999": docCacheCap,
		"no-store": 0, "no-cache, max-age=60": 0, "max-age=-1": 0, "max-age=x": 0, "private": docCacheDefault,
	} {
		h := http.Header{}
		if cc != "" {
			h.Set("Cache-Control", cc)
		}
		if got := cacheLifetime(h); got != want {
			t.Errorf("cacheLifetime(%q) = %v, want %v", cc, got, want)
		}
	}
}
