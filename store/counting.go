package store

import (
	"context"
	"io"
	"sync/atomic"
)

// Counts are the calls a Counting store has seen, and the bytes its Put calls read.
type Counts struct {
	Has, Stat, Put, Open, Delete, List int64
	BytesPut                           int64
}

// Requests is the number of calls of every kind.
func (c Counts) Requests() int64 { return c.Has + c.Stat + c.Put + c.Open + c.Delete + c.List }

// Counting is a Store that counts the calls made to the Store it wraps, for tests and
// benchmarks.
type Counting struct {
	s                            Store
	has, stat, put, open, delete atomic.Int64
	list                         atomic.Int64
	bytesPut                     atomic.Int64
}

var _ Store = (*Counting)(nil)

// NewCounting wraps s.
func NewCounting(s Store) *Counting { return &Counting{s: s} }

// Counts returns the counts so far.
func (c *Counting) Counts() Counts {
	return Counts{
		Has: c.has.Load(), Stat: c.stat.Load(), Put: c.put.Load(), Open: c.open.Load(),
		Delete: c.delete.Load(), List: c.list.Load(), BytesPut: c.bytesPut.Load(),
	}
}

// Reset sets every count back to zero.
func (c *Counting) Reset() {
	for _, n := range []*atomic.Int64{&c.has, &c.stat, &c.put, &c.open, &c.delete, &c.list, &c.bytesPut} {
		n.Store(0)
	}
}

func (c *Counting) String() string { return c.s.String() }

func (c *Counting) Has(ctx context.Context, sum string) (bool, error) {
	c.has.Add(1)
	return c.s.Has(ctx, sum)
}

func (c *Counting) Stat(ctx context.Context, sum string) (Info, error) {
	c.stat.Add(1)
	return c.s.Stat(ctx, sum)
}

// Put counts the call and the bytes the wrapped store reads. The reader it passes on
// keeps r's io.Seeker, so a retrying store below still works.
func (c *Counting) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	c.put.Add(1)
	cr := &countingReader{r: r, n: &c.bytesPut}
	if s, ok := r.(io.Seeker); ok {
		return c.s.Put(ctx, sum, size, &countingReadSeeker{countingReader: cr, s: s})
	}
	return c.s.Put(ctx, sum, size, cr)
}

func (c *Counting) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	c.open.Add(1)
	return c.s.Open(ctx, sum, offset, length)
}

func (c *Counting) Delete(ctx context.Context, sum string) error {
	c.delete.Add(1)
	return c.s.Delete(ctx, sum)
}

// List counts one call however many objects it lists.
func (c *Counting) List(ctx context.Context, fn func(Listed) error) error {
	c.list.Add(1)
	return c.s.List(ctx, fn)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

type countingReadSeeker struct {
	*countingReader
	s io.Seeker
}

func (r *countingReadSeeker) Seek(offset int64, whence int) (int64, error) {
	return r.s.Seek(offset, whence)
}
