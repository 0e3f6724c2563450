// Package controld is armor's control daemon as a library: it records verified releases
// (a release serves nothing its signed files do not list: bound.go, indexcache.go),
// flips each repository's active pointer by compare-and-swap, never backwards unless
// told to (advance.go), keeps the history, manages repositories (hostnames, public keys,
// retention) and tokens, publishes the routes feed that edges poll, and collects the
// object store's garbage: releases no rule keeps and objects no recorded release
// references (gc.go). It speaks HTTP+JSON under /v1 (see API.md).
//
// Run is the daemon; NewServer and Server.Handler serve the API in process; CreateToken
// bootstraps the first admin token against a data directory while no daemon runs. State
// lives behind state.Store (bbolt by default), objects behind store.Store. The CLI wiring
// is in package cli.
package controld
