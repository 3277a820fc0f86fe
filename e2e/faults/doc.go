// Package faults holds fault tests of a real `assent serve` process: it is
// killed with SIGKILL under write load, its data directory runs out of
// space, its PostgreSQL server is stopped and started again under write
// load, two of them decide the same approval at once, and one dies after
// a command proposal was filed on it, which the other then runs. Every write
// the server acknowledged (a 2xx answer) must be present after a restart,
// a store outage must be answered 503 store_unavailable (never a success,
// never 500), and every decision must be made once.
//
// A short round runs with `go test`; `go test ./e2e/faults -faults.long`
// runs the long one, whose figures docs/deploy.md reports. The full-disk
// test mounts a small tmpfs and needs root; it skips otherwise. The
// two-node tests need PostgreSQL (ASSENT_TEST_POSTGRES) and skips without
// it; the PostgreSQL restart makes a server of its own with Debian's
// PostgreSQL binaries and skips when they are absent (unless
// ASSENT_REQUIRE_POSTGRES=1).
package faults
