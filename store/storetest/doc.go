// Package storetest is the test suite every store.Store implementation runs: it checks the
// whole Store contract (put-if-absent, digest verification, ranges, not-found errors,
// concurrency) the same way for the in-memory fake, a local directory and S3.
package storetest
