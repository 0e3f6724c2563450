package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
	"golang.org/x/sync/errgroup"
)

var errFlaky = errors.New("flaky store: try again")

// flakyStore fails its first failures calls; a failing Put first reads half the object,
// as a dropped connection would.
type flakyStore struct {
	store.Store
	failures int64
	calls    atomic.Int64
}

func (f *flakyStore) fail() bool { return f.calls.Add(1) <= f.failures }

func (f *flakyStore) Stat(ctx context.Context, sum string) (store.Info, error) {
	if f.fail() {
		return store.Info{}, errFlaky
	}
	return f.Store.Stat(ctx, sum)
}

func (f *flakyStore) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	if f.fail() {
		_, _ = io.CopyN(io.Discard, r, size/2)
		return false, errFlaky
	}
	return f.Store.Put(ctx, sum, size, r)
}

func TestWithRetry(t *testing.T) {
	t.Parallel()
	o := storetest.NewObject([]byte("retry me, from the start"))
	tests := []struct {
		name      string
		failures  int64
		attempts  int
		seekable  bool
		wantErr   error
		wantCalls int64
	}{
		{"succeeds after failures", 2, 3, true, nil, 3},
		{"gives up", 5, 3, true, errFlaky, 3},
		{"single attempt", 5, 1, true, errFlaky, 1},
		{"no retry without io.Seeker", 1, 3, false, errFlaky, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMemory()
			flaky := &flakyStore{Store: mem, failures: tc.failures}
			s := store.WithRetry(flaky, tc.attempts, time.Millisecond)
			var r io.Reader = bytes.NewReader(o.Data)
			if !tc.seekable {
				r = io.MultiReader(r)
			}
			_, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)), r)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Put = %v, want %v", err, tc.wantErr)
			}
			if got := flaky.calls.Load(); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
			if err == nil {
				storetest.AssertContent(t, mem, o)
			}
		})
	}
}

func TestWithRetryPermanentErrors(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	c := store.NewCounting(mem)
	s := store.WithRetry(c, 5, time.Millisecond)
	o := storetest.NewObject([]byte("x"))
	ctx := context.Background()
	if _, err := s.Stat(ctx, o.Sum); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat = %v", err)
	}
	if _, err := s.Put(ctx, o.Sum, 2, bytes.NewReader([]byte("xy"))); !errors.Is(err, store.ErrDigestMismatch) {
		t.Fatalf("Put = %v", err)
	}
	if _, err := s.Has(ctx, "nope"); !errors.Is(err, store.ErrInvalidDigest) {
		t.Fatalf("Has = %v", err)
	}
	if got := c.Counts(); got != (store.Counts{Stat: 1, Put: 1, Has: 1, BytesPut: 2}) {
		t.Errorf("permanent errors were retried: %+v", got)
	}
	// A cancelled context stops the waiting between tries.
	flaky := &flakyStore{Store: mem, failures: 100}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := store.WithRetry(flaky, 100, time.Second).Stat(cctx, o.Sum)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stat while cancelled = %v, want context.Canceled", err)
	}
}

// gaugeStore records the most calls in flight at once.
type gaugeStore struct {
	store.Store
	mu       sync.Mutex
	now, max int
}

func (g *gaugeStore) Has(ctx context.Context, sum string) (bool, error) {
	g.mu.Lock()
	g.now++
	g.max = max(g.max, g.now)
	g.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return g.Store.Has(ctx, sum)
}

func TestWithLimit(t *testing.T) {
	t.Parallel()
	g := &gaugeStore{Store: store.NewMemory()}
	// 30 checks, 10 at a time, through a limit of 3.
	limited := store.WithLimit(g, 3)
	var eg errgroup.Group
	eg.SetLimit(10)
	for i := range 30 {
		o := storetest.RandomObject(9<<32|uint64(i), 100)
		eg.Go(func() error {
			_, err := limited.Has(context.Background(), o.Sum)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	if g.max > 3 || g.max < 2 {
		t.Errorf("at most %d calls in flight; want 3 (at least 2)", g.max)
	}
	// An open reader holds its slot until closed.
	s := store.WithLimit(store.NewMemory(), 1)
	o := storetest.NewObject([]byte("held"))
	storetest.Put(t, s, o)
	rc, err := s.Open(context.Background(), o.Sum, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Has(ctx, o.Sum); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Has while the only slot is held = %v; want it to wait", err)
	}
	rc.Close()
	rc.Close()
	if ok, err := s.Has(context.Background(), o.Sum); !ok || err != nil {
		t.Errorf("Has after Close = %v, %v", ok, err)
	}
}

func TestCounting(t *testing.T) {
	t.Parallel()
	c := store.NewCounting(store.NewMemory())
	ctx := context.Background()
	o := storetest.NewObject([]byte("counted"))
	storetest.Put(t, c, o)
	storetest.Put(t, c, o) // present: not read
	_, _ = c.Has(ctx, o.Sum)
	_, _ = c.Stat(ctx, o.Sum)
	storetest.Read(t, c, o.Sum, 0, -1)
	_ = c.Delete(ctx, o.Sum)
	want := store.Counts{Has: 1, Stat: 1, Put: 2, Open: 1, Delete: 1, BytesPut: int64(len(o.Data))}
	if got := c.Counts(); got != want || got.Requests() != 6 {
		t.Errorf("Counts() = %+v (%d requests), want %+v", got, got.Requests(), want)
	}
	c.Reset()
	if got := c.Counts(); got != (store.Counts{}) {
		t.Errorf("after Reset: %+v", got)
	}
}

// listFailing fails its first failures Lists, after showing fn the first object when
// midway is set, as a listing cut off after its first page would.
type listFailing struct {
	store.Store
	failures int64
	midway   bool
	calls    atomic.Int64
}

func (l *listFailing) List(ctx context.Context, fn func(store.Listed) error) error {
	if l.calls.Add(1) > l.failures {
		return l.Store.List(ctx, fn)
	}
	if l.midway {
		stop := errors.New("seen one")
		err := l.Store.List(ctx, func(o store.Listed) error {
			if err := fn(o); err != nil {
				return err
			}
			return stop
		})
		if err != nil && !errors.Is(err, stop) {
			return err
		}
	}
	return errFlaky
}

// WithRetry retries a listing that failed before it showed anything, and never one that
// did: the caller would see objects twice.
func TestWithRetryList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		midway    bool
		wantErr   error
		wantCalls int64
		wantSeen  int
	}{
		{"failed at once: retried", false, nil, 2, 3},
		{"failed midway: returned", true, errFlaky, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMemory()
			for i := range 3 {
				storetest.Put(t, mem, storetest.NewObject([]byte{byte(i)}))
			}
			l := &listFailing{Store: mem, failures: 1, midway: tc.midway}
			seen := 0
			err := store.WithRetry(l, 3, time.Millisecond).List(context.Background(), func(store.Listed) error {
				seen++
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("List = %v, want %v", err, tc.wantErr)
			}
			if l.calls.Load() != tc.wantCalls || seen != tc.wantSeen {
				t.Errorf("%d listings, %d objects seen; want %d, %d", l.calls.Load(), seen, tc.wantCalls, tc.wantSeen)
			}
		})
	}
}
