package store

import (
	"context"
	"io"
	"sync"
)

// limitStore bounds the number of calls in flight.
type limitStore struct {
	s   Store
	sem chan struct{}
}

var _ Store = (*limitStore)(nil)

// WithLimit returns s allowing at most n calls at once (n < 1 means 1). A reader returned
// by Open holds its slot until it is closed, so callers must close it.
func WithLimit(s Store, n int) Store {
	return &limitStore{s: s, sem: make(chan struct{}, max(n, 1))}
}

func (l *limitStore) acquire(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *limitStore) release() { <-l.sem }

func (l *limitStore) String() string { return l.s.String() }

func (l *limitStore) Has(ctx context.Context, sum string) (bool, error) {
	if err := l.acquire(ctx); err != nil {
		return false, err
	}
	defer l.release()
	return l.s.Has(ctx, sum)
}

func (l *limitStore) Stat(ctx context.Context, sum string) (Info, error) {
	if err := l.acquire(ctx); err != nil {
		return Info{}, err
	}
	defer l.release()
	return l.s.Stat(ctx, sum)
}

func (l *limitStore) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	if err := l.acquire(ctx); err != nil {
		return false, err
	}
	defer l.release()
	return l.s.Put(ctx, sum, size, r)
}

func (l *limitStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	rc, err := l.s.Open(ctx, sum, offset, length)
	if err != nil {
		l.release()
		return nil, err
	}
	return &releasingReader{ReadCloser: rc, release: l.release}, nil
}

func (l *limitStore) Delete(ctx context.Context, sum string) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.s.Delete(ctx, sum)
}

// List holds one slot for the whole listing.
func (l *limitStore) List(ctx context.Context, fn func(Listed) error) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.s.List(ctx, fn)
}

// releasingReader gives back a semaphore slot when closed (once).
type releasingReader struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releasingReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
