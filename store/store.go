package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors of the Store contract. Implementations wrap them; callers test with errors.Is.
var (
	// ErrNotFound: the object is not in the store.
	ErrNotFound = errors.New("object not found")
	// ErrDigestMismatch: the bytes given to Put do not have the declared size or SHA-256.
	// Nothing was stored.
	ErrDigestMismatch = errors.New("object content does not match its digest")
	// ErrInvalidDigest: the digest is not 64 lowercase hex digits.
	ErrInvalidDigest = errors.New("invalid sha256 digest")
)

// Info describes a stored object.
type Info struct {
	SHA256 string
	Size   int64
}

// Listed is an object found by List.
type Listed struct {
	SHA256 string
	Size   int64
	// ModTime is when the object was written to the store. A garbage collector leaves
	// objects younger than its grace period alone: they may belong to a push that has
	// not recorded its release yet.
	ModTime time.Time
}

// Store is a content-addressed object store.
//
// Error contract: a missing object is reported by Stat and Open as an error wrapping
// ErrNotFound, and by Has as (false, nil). A sum that is not 64 lowercase hex digits gives
// an error wrapping ErrInvalidDigest from every method. A context that ends gives an error
// wrapping ctx.Err(). Any other error means the store could not answer (network,
// permissions, credentials); callers may retry those. No method leaves a
// partial object visible under its final name: an object is either absent or complete.
// All methods are safe for concurrent use.
type Store interface {
	// Has reports whether the object is present.
	Has(ctx context.Context, sum string) (bool, error)
	// Stat returns the object's size, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, sum string) (Info, error)
	// Put stores size bytes read from r under sum unless the object is already present,
	// and reports whether it wrote anything. It checks the size and SHA-256 of what it
	// reads while it reads; on a mismatch it stores nothing and returns an error wrapping
	// ErrDigestMismatch. An object already present is never rewritten.
	Put(ctx context.Context, sum string, size int64, r io.Reader) (created bool, err error)
	// Open returns a reader of length bytes starting at offset; length < 0 reads to the
	// end. The range is clipped to the object: past the end it reads fewer bytes, or none
	// when offset >= size. A negative offset is an error. A missing object gives an error
	// wrapping ErrNotFound. The caller must close the reader.
	Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error)
	// Delete removes the object; deleting a missing object is not an error. It exists for
	// a garbage collector, which must make sure no retained release still lists the object.
	Delete(ctx context.Context, sum string) error
	// List calls fn once for every object in the store, in no particular order, and
	// stops at the first error fn returns, returning it. Anything under the store's root
	// that is not an object (a temporary upload, a name that is not a digest) is skipped.
	// An object put or deleted while List runs may or may not be seen. It reads the whole
	// store, so only a garbage collector calls it: no publishing path ever lists.
	List(ctx context.Context, fn func(Listed) error) error
	// String names the store for messages, without credentials.
	String() string
}

// ObjectPath is the object's key within the store's root.
func ObjectPath(sum string) string {
	return "objects/sha256/" + sum[:2] + "/" + sum
}

// ReadSized reads r to its end, into one buffer of size bytes when size (what the
// object is known to hold) is not negative, with one byte to spare to see the end: an
// object longer than that is still read whole. A negative size reads as io.ReadAll.
func ReadSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	buf := make([]byte, size+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return append(buf, rest...), nil
}
