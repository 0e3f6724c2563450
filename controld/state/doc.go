// Package state is controld's persistent state behind one seam, Store: repositories with
// their hostnames, keys and retention; recorded releases; each repository's active
// pointer and its history; API tokens (as hashes); and the routes version that edges
// poll.
//
// An implementation makes every method one transaction: a compare-and-swap on the active
// pointer, the recording of a release (and its optional activation), a hostname claim,
// all happen completely or not at all, also across a crash. Store does not read the
// clock: callers pass the times to record. The bbolt implementation lives in
// state/bolt; every implementation runs the shared suite in state/statetest.
package state
