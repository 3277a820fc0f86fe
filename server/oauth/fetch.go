package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// Bounds of client ID metadata document fetches. A document is fetched at
// most once per cache lifetime, and fetches to one host and in all are
// rate limited, so a flood of authorization requests naming documents
// cannot make the server fetch on an attacker's behalf.
const (
	fetchTimeout     = 5 * time.Second
	docCacheMax      = 256              // documents and refusals kept
	docCacheDefault  = 5 * time.Minute  // lifetime without Cache-Control max-age
	docCacheCap      = time.Hour        // longest lifetime, whatever max-age says
	docRefusalTTL    = 30 * time.Second // lifetime of a failed fetch
	hostFetchEvery   = 6 * time.Second  // one fetch per host per this, after the burst
	hostFetchBurst   = 5
	totalFetchEvery  = time.Second // one fetch in all per this, after the burst
	totalFetchBurst  = 20
	hostLimitersKept = 1024
)

// refusedPrefixes are the IPv4 and IPv6 networks a metadata fetch never
// reaches: this host, private and shared networks, benchmarking and
// documentation ranges, reserved and multicast space, and the transition
// prefixes whose embedded IPv4 address is checked separately (see
// checkPublic).
var refusedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // shared address space (CGNAT)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay anycast
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and the broadcast address
		"::/96",           // unspecified, loopback and IPv4-compatible
		"100::/64",        // discard-only
		"64:ff9b:1::/48",  // local-use NAT64
		"2001::/32",       // Teredo: the IPv4 address inside is obscured
		"2001:db8::/32",   // documentation
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// checkPublic reports an error unless a is an address on the public
// internet. An IPv4-mapped address is checked as IPv4; a NAT64 or 6to4
// address is checked by the IPv4 address it carries.
func checkPublic(a netip.Addr) error {
	if !a.IsValid() {
		return errors.New("no address")
	}
	a = a.Unmap().WithZone("")
	for _, p := range refusedPrefixes {
		if p.Contains(a) {
			return fmt.Errorf("address %s is not public (%s)", a, p)
		}
	}
	if a.Is6() {
		b := a.As16()
		var inner netip.Addr
		switch {
		case nat64.Contains(a):
			inner = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(a):
			inner = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if inner.IsValid() {
			if err := checkPublic(inner); err != nil {
				return fmt.Errorf("address %s carries %s: %w", a, inner, err)
			}
		}
	}
	return nil
}

// resolver looks up host names; *net.Resolver is one.
type resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// publicDialer resolves a host name once, refuses it unless every address
// it has is public, and dials the checked address itself, so that a
// second lookup (DNS rebinding) cannot lead elsewhere.
type publicDialer struct {
	resolve resolver
	dialer  *net.Dialer
}

func (d publicDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.resolve.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	for _, a := range addrs {
		if err := checkPublic(a); err != nil {
			return nil, fmt.Errorf("refused to fetch from %s: %w", host, err)
		}
	}
	var last error
	for _, a := range addrs {
		c, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// newFetchClient returns the client that fetches client ID metadata
// documents: bounded in time, following no redirects and, unless
// insecure, reaching only public addresses.
func newFetchClient(insecure bool, r resolver) *http.Client {
	d := &net.Dialer{Timeout: fetchTimeout}
	dial := d.DialContext
	if !insecure {
		// The dialer's own check sees the address actually dialed: a
		// second guard should the first ever be bypassed.
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return checkPublic(ap.Addr())
		}
		if r == nil {
			r = net.DefaultResolver
		}
		dial = publicDialer{resolve: r, dialer: d}.DialContext
	}
	tr := &http.Transport{DialContext: dial, TLSHandshakeTimeout: fetchTimeout, ResponseHeaderTimeout: fetchTimeout, MaxIdleConns: 4, MaxResponseHeaderBytes: 16 << 10}
	return &http.Client{
		Transport: tr,
		Timeout:   fetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// docCache keeps fetched client ID metadata documents, and refusals, for
// a while, and limits how often documents are fetched.
type docCache struct {
	mu      sync.Mutex
	entries map[string]docEntry
	hosts   map[string]*rate.Limiter
	total   *rate.Limiter
}

type docEntry struct {
	c       client
	err     error
	expires time.Time
}

func newDocCache() *docCache {
	return &docCache{
		entries: map[string]docEntry{},
		hosts:   map[string]*rate.Limiter{},
		total:   rate.NewLimiter(rate.Every(totalFetchEvery), totalFetchBurst),
	}
}

// get returns the cached answer for id at now.
func (c *docCache) get(id string, now time.Time) (docEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || !now.Before(e.expires) {
		return docEntry{}, false
	}
	return e, true
}

// put keeps e for id, making room by dropping expired entries and then
// the one closest to expiry.
func (c *docCache) put(id string, e docEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; !ok && len(c.entries) >= docCacheMax {
		victim := ""
		for k, v := range c.entries {
			if !now.Before(v.expires) {
				delete(c.entries, k)
				continue
			}
			if victim == "" || v.expires.Before(c.entries[victim].expires) {
				victim = k
			}
		}
		if len(c.entries) >= docCacheMax {
			delete(c.entries, victim)
		}
	}
	c.entries[id] = e
}

// allow reports whether a document on host may be fetched at now.
func (c *docCache) allow(host string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.hosts[host]
	if !ok {
		if len(c.hosts) >= hostLimitersKept {
			// Limiters that are full again forget nothing by going.
			for h, hl := range c.hosts {
				if hl.TokensAt(now) >= hostFetchBurst {
					delete(c.hosts, h)
				}
			}
			if len(c.hosts) >= hostLimitersKept {
				return false
			}
		}
		l = rate.NewLimiter(rate.Every(hostFetchEvery), hostFetchBurst)
		c.hosts[host] = l
	}
	if !l.AllowN(now, 1) {
		return false
	}
	if !c.total.AllowN(now, 1) {
		return false
	}
	return true
}

// cacheLifetime is how long a document answered with header h is kept:
// its Cache-Control max-age, at most docCacheCap; nothing with no-store
// or no-cache; docCacheDefault without a max-age.
func cacheLifetime(h http.Header) time.Duration {
	cc := strings.ToLower(h.Get("Cache-Control"))
	if cc == "" {
		return docCacheDefault
	}
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "no-store" || d == "no-cache":
			return 0
		case strings.HasPrefix(d, "max-age="):
			n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64)
			if err != nil || n <= 0 {
				return 0
			}
			if n > int64(docCacheCap/time.Second) {
				return docCacheCap
			}
			return time.Duration(n) * time.Second
		}
	}
	return docCacheDefault
}

// hostOf returns the host of a client ID URL, for rate limiting.
func hostOf(id string) string {
	u, err := url.Parse(id)
	if err != nil {
		return id
	}
	return strings.ToLower(u.Hostname())
}
