// Package store is armor's content-addressed object store: every object lives once, under
// its SHA-256, at objects/sha256/<first two hex digits>/<all 64 hex digits>.
//
// Store is the seam. Rclone implements it over any rclone remote (a local path, S3/R2,
// GCS, or a remote from the user's rclone.conf); Memory is the in-memory fake for fast
// unit tests. Cross-cutting behaviour (retries, concurrency limits, request counting) is
// added by wrapping a Store, never inside an implementation: WithRetry, WithLimit,
// NewCounting. The shared contract tests are in package storetest. Making a release's
// objects present (uploading only the missing ones) is a workflow of package publish.
package store
