package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// retryStore retries the failures of a Store that may be transient.
type retryStore struct {
	s        Store
	attempts int
	base     time.Duration
}

var _ Store = (*retryStore)(nil)

// WithRetry returns s with each call tried up to attempts times, waiting base, 2·base,
// 4·base, ... (each with random jitter of up to half) between tries. It does not retry
// answers that another try cannot change: ErrNotFound, ErrDigestMismatch,
// ErrInvalidDigest, or the caller's context ending.
//
// Put can only be retried when its reader can be rewound: if r implements io.Seeker,
// each retry seeks back to where r was when Put was called (an *os.File does); any other
// reader gets a single try.
func WithRetry(s Store, attempts int, base time.Duration) Store {
	return &retryStore{s: s, attempts: max(attempts, 1), base: base}
}

func (r *retryStore) String() string { return r.s.String() }

// do calls fn until it succeeds, fails permanently, or the attempts run out.
func (r *retryStore) do(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < r.attempts; i++ {
		if i > 0 {
			if werr := r.wait(ctx, i); werr != nil {
				return fmt.Errorf("%w (while waiting to retry: %v)", werr, err)
			}
		}
		err = fn()
		if !retryable(ctx, err) {
			return err
		}
	}
	if r.attempts > 1 {
		return fmt.Errorf("after %d attempts: %w", r.attempts, err)
	}
	return err
}

// wait sleeps before try i (1-based retries).
func (r *retryStore) wait(ctx context.Context, i int) error {
	d := r.base << (i - 1)
	if d > 0 {
		d -= time.Duration(rand.Int64N(int64(d)/2 + 1))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func retryable(ctx context.Context, err error) bool {
	switch {
	case err == nil, ctx.Err() != nil:
		return false
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrDigestMismatch), errors.Is(err, ErrInvalidDigest):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

func (r *retryStore) Has(ctx context.Context, sum string) (ok bool, err error) {
	err = r.do(ctx, func() error {
		ok, err = r.s.Has(ctx, sum)
		return err
	})
	return ok, err
}

func (r *retryStore) Stat(ctx context.Context, sum string) (info Info, err error) {
	err = r.do(ctx, func() error {
		info, err = r.s.Stat(ctx, sum)
		return err
	})
	return info, err
}

func (r *retryStore) Put(ctx context.Context, sum string, size int64, rd io.Reader) (created bool, err error) {
	seeker, ok := rd.(io.Seeker)
	if !ok {
		return r.s.Put(ctx, sum, size, rd)
	}
	start, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil {
		return r.s.Put(ctx, sum, size, rd)
	}
	first := true
	err = r.do(ctx, func() error {
		if !first {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("rewind for retry: %w", err)
			}
		}
		first = false
		created, err = r.s.Put(ctx, sum, size, rd)
		return err
	})
	return created, err
}

// Open retries opening; once a reader is returned, errors while reading are the caller's.
func (r *retryStore) Open(ctx context.Context, sum string, offset, length int64) (rc io.ReadCloser, err error) {
	err = r.do(ctx, func() error {
		rc, err = r.s.Open(ctx, sum, offset, length)
		return err
	})
	return rc, err
}

func (r *retryStore) Delete(ctx context.Context, sum string) error {
	return r.do(ctx, func() error { return r.s.Delete(ctx, sum) })
}

// List retries a listing that failed before it called fn; once fn has seen an object, a
// failure is returned as it is, since another try would show fn objects twice.
func (r *retryStore) List(ctx context.Context, fn func(Listed) error) error {
	called := false
	var final error
	err := r.do(ctx, func() error {
		err := r.s.List(ctx, func(o Listed) error {
			called = true
			return fn(o)
		})
		if called {
			final = err
			return nil
		}
		return err
	})
	if called {
		return final
	}
	return err
}
