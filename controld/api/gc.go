package api

import (
	"time"

	"github.com/armor-apt/armor/internal/duration"
)

// CodeKept is the error code of a refused release deletion (409): the release is
// active, retained within the retention window, or what a rollback would activate. The
// message says which.
const CodeKept = "kept"

// CodeBusy is the error code of a garbage collection asked while one runs (409).
const CodeBusy = "busy"

// GCRequest is the body of POST /v1/gc. With DryRun nothing is deleted: the report says
// what would be.
type GCRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// GCRelease is a release a collection deleted (or would delete).
type GCRelease struct {
	Repository string    `json:"repository"`
	ID         string    `json:"id"`
	Manifest   string    `json:"manifest"`
	PushedAt   time.Time `json:"pushed_at"`
}

// GCReport says what a garbage collection did, or in a dry run would do. Objects and
// bytes count the store as it was listed.
type GCReport struct {
	DryRun    bool              `json:"dry_run"`
	StartedAt time.Time         `json:"started_at"`
	Elapsed   duration.Duration `json:"elapsed"`
	// Grace is how old an object must be to be deleted: younger ones may belong to a push
	// that has not recorded its release yet.
	Grace duration.Duration `json:"grace"`
	// Releases are the releases deleted because no rule keeps them any more.
	Releases []GCRelease `json:"releases"`
	// KeptReleases counts the releases that stay recorded, in every repository.
	KeptReleases int `json:"kept_releases"`
	// Objects and Bytes: everything listed in the store.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Referenced: objects of the releases that stay recorded (manifests included).
	Referenced      int   `json:"referenced"`
	ReferencedBytes int64 `json:"referenced_bytes"`
	// Young: objects no release references that are younger than Grace, left alone.
	Young      int   `json:"young"`
	YoungBytes int64 `json:"young_bytes"`
	// Deleted: objects removed from the store (in a dry run: that would be).
	Deleted      int   `json:"deleted"`
	DeletedBytes int64 `json:"deleted_bytes"`
}
