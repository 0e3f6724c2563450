package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// ErrNoStore is returned when a workflow that needs the store is given neither an opened
// store nor a remote; the caller says where the store should have been configured.
var ErrNoStore = errors.New("no store configured")

// storeAttempts bounds retries of a store request: enough for a transient error, few
// enough that an endpoint that does not answer fails within about half a minute.
const storeAttempts = 3

// OpenStore opens the store at an rclone remote (a directory, a connection string or a
// remote from the user's rclone.conf), retrying each request a few times. An empty
// remote is ErrNoStore.
func OpenStore(ctx context.Context, remote string) (store.Store, error) {
	if remote == "" {
		return nil, ErrNoStore
	}
	rs, err := store.OpenRclone(ctx, remote)
	if err != nil {
		return nil, err
	}
	return store.WithRetry(rs, storeAttempts, 200*time.Millisecond), nil
}

// FetchObject reads a whole object from s and checks it against its digest: an object
// whose content does not match is store.ErrDigestMismatch.
func FetchObject(ctx context.Context, s store.Store, sum string) ([]byte, error) {
	return FetchSized(ctx, s, sum, -1)
}

// FetchSized is FetchObject for an object whose size is known (a manifest lists it; -1
// when it is not): it reads into one buffer of that size. io.ReadAll grows chunk after
// chunk and copies them into a last buffer, touching about three times the object's
// size: for the largest objects a fresh runner fetches (the parent's indexes, tens of
// megabytes), the page faults of that memory cost more than the read.
func FetchSized(ctx context.Context, s store.Store, sum string, size int64) ([]byte, error) {
	data, err := ReadSized(ctx, s, sum, size)
	if err != nil {
		return nil, err
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("object %s in %s: %w", sum, s, store.ErrDigestMismatch)
	}
	return data, nil
}

// ReadSized is FetchSized without the check of the digest, for a caller that checks
// what it reads itself.
func ReadSized(ctx context.Context, s store.Store, sum string, size int64) ([]byte, error) {
	rc, err := s.Open(ctx, sum, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("read object %s from %s: %w", sum, s, err)
	}
	defer rc.Close()
	data, err := store.ReadSized(rc, size)
	if err != nil {
		return nil, fmt.Errorf("read object %s from %s: %w", sum, s, err)
	}
	return data, nil
}

// FetchManifest reads and parses the release manifest stored as the object sum.
func FetchManifest(ctx context.Context, s store.Store, sum string) (*manifest.Manifest, error) {
	data, err := FetchObject(ctx, s, sum)
	if err != nil {
		return nil, err
	}
	return manifest.Parse(data, "store object "+sum)
}
