package state

import (
	"context"
	"time"
)

// Problems a MissingObject can have, as a store check names them.
const (
	ObjectMissing = "missing"       // the object store lacks the object
	ObjectSize    = "size_mismatch" // it holds the object with another size
	ObjectHash    = "hash_mismatch" // it holds other bytes under the object's name
)

// MissingObject is an object of a repository's releases that a store check found gone
// from the object store (or damaged there) and controld then found so too. While it is
// in the set, controld does not take it as present because the active release uses it:
// recording a release that lists it checks it again.
type MissingObject struct {
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"` // as the releases list it; -1 when unknown (a manifest)
	Problem string    `json:"problem"`
	FoundAt time.Time `json:"found_at"`
	FoundBy string    `json:"found_by"` // the token that reported it
}

// MissingObjects is the part of Store that remembers each repository's known-missing
// objects.
type MissingObjects interface {
	// MarkMissing adds objects to repo's set; an object already there is replaced.
	// ErrNotFound for an unknown repository.
	MarkMissing(ctx context.Context, repo string, objs []MissingObject) error
	// ClearMissing removes the objects with these digests from repo's set; digests not
	// in it are ignored. ErrNotFound for an unknown repository.
	ClearMissing(ctx context.Context, repo string, sums []string) error
	// Missing returns repo's set sorted by digest; ErrNotFound for an unknown repository.
	Missing(ctx context.Context, repo string) ([]MissingObject, error)
}
