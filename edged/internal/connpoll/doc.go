// Package connpoll is edged's opt-in connection poller (conn_poller = "edged" in
// edged.toml). By default edged's connections wait in Go's own poller and fasthttp
// enforces the request timeout; this package replaces both for the public listener.
//
// A Listener (NewListener) moves every accepted TCP connection to an epoll instance
// of its own, which wakes ready connections first in, first out, as nginx serves
// epoll's ready list: Go's poller runs each batch of ready connections last-first, so
// under load the request that arrived first waits longest (poller_linux.go says more).
// Its connections read and write with raw non-blocking system calls, write long
// responses in turns of 56 KiB behind the connections that became ready meanwhile, and
// enforce the request timeout from a clock that ticks every 100 ms instead of reading
// the time per request (listener.go).
//
// Why it is kept, and why only as an opt-in: in a paired A/B (alternating rounds of
// BenchmarkVsNginx) its throughput gains lay within the spread between rounds of the
// same code, but its p99 gains did not (docs/benchmarks.md has the figures). It is Linux-only, relies on nested
// epoll wake-ups (broken on some kernels between 5.5 and 5.7, fixed by 0c54a6a44bf3),
// and is some 900 lines that Go's poller does not need.
package connpoll
