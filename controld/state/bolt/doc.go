// Package bolt implements state.Store in one bbolt file: each method is one bbolt
// transaction, committed with fsync, so a crash leaves every change whole or absent.
//
// Layout: buckets meta (schema, routes version), repos (name → JSON), hosts (hostname →
// repository), releases/<repo> (id → JSON), history/<repo> (big-endian sequence →
// JSON), tokens (name → JSON), tokenhash (hash → name) and rolledback/<repo> (id → JSON
// mark of a rolled-back release; made by the first rollback).
package bolt
