package publish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/armor-apt/armor/store"
	"golang.org/x/sync/errgroup"
)

// Upload is an object to make present in a store: its digest and size, and the local file
// holding it.
type Upload struct {
	SHA256 string
	Size   int64
	Path   string
}

// UploadOptions tune UploadMissing.
type UploadOptions struct {
	// Concurrency is the number of objects checked and uploaded at once; default 8.
	Concurrency int
	// Known holds digests known to be present (the objects of the release pushed
	// before): UploadMissing does not even check them.
	Known map[string]bool
	// DryRun only checks, and reports in UploadStats.WouldUpload what would be uploaded.
	DryRun bool
	// Progress, if set, is called after every step, from any goroutine; it should be
	// cheap and throttle its own output.
	Progress func(UploadProgress)
}

// UploadProgress counts the objects that UploadMissing checks (those not Known) and their bytes.
type UploadProgress struct {
	ObjectsDone, ObjectsTotal int
	BytesDone, BytesTotal     int64
}

// UploadStats says what an UploadMissing did. Objects counts distinct digests.
type UploadStats struct {
	Objects, Known, Present, Uploaded int
	BytesUploaded, BytesPresent       int64
	// WouldUpload lists, in a dry run, the objects missing from the store, by digest.
	WouldUpload []Upload
}

// UploadMissing makes every upload present in s. It skips Known digests, checks the others with
// Has, and uploads the missing ones, streaming each from its file; the store verifies
// size and SHA-256 as it reads, so a file that changed since the build is refused (the
// error names it) and nothing is stored for it. A digest listed several times is handled
// once. UploadMissing is idempotent: killed at any point and run again, it uploads only what did
// not arrive. On error it stops early and returns the stats so far.
func UploadMissing(ctx context.Context, s store.Store, uploads []Upload, o UploadOptions) (UploadStats, error) {
	todo, err := distinct(uploads)
	if err != nil {
		return UploadStats{}, err
	}
	p := &pusher{s: s, o: o}
	p.stats.Objects = len(todo)
	todo = slices.DeleteFunc(todo, func(u Upload) bool {
		if o.Known[u.SHA256] {
			p.stats.Known++
			return true
		}
		return false
	})
	p.progress.ObjectsTotal = len(todo)
	for _, u := range todo {
		p.progress.BytesTotal += u.Size
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(o.Concurrency, 8))
	for _, u := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return p.push(gctx, u) })
	}
	err = g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	slices.SortFunc(p.stats.WouldUpload, func(a, b Upload) int { return cmp.Compare(a.SHA256, b.SHA256) })
	return p.stats, err
}

// distinct validates uploads and keeps the first of each digest, sorted by digest.
func distinct(uploads []Upload) ([]Upload, error) {
	seen := make(map[string]Upload, len(uploads))
	out := make([]Upload, 0, len(uploads))
	for _, u := range uploads {
		if !store.ValidDigest(u.SHA256) {
			return nil, fmt.Errorf("push %s: %w: %q", u.Path, store.ErrInvalidDigest, u.SHA256)
		}
		if u.Size < 0 {
			return nil, fmt.Errorf("push %s: negative size %d", u.Path, u.Size)
		}
		if prev, ok := seen[u.SHA256]; ok {
			if prev.Size != u.Size {
				return nil, fmt.Errorf("push: sha256 %s is listed with size %d (%s) and %d (%s)",
					u.SHA256, prev.Size, prev.Path, u.Size, u.Path)
			}
			continue
		}
		seen[u.SHA256] = u
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Upload) int { return cmp.Compare(a.SHA256, b.SHA256) })
	return out, nil
}

// pusher is the shared state of one UploadMissing.
type pusher struct {
	s store.Store
	o UploadOptions

	reportMu sync.Mutex // serialises Progress calls
	mu       sync.Mutex
	stats    UploadStats
	progress UploadProgress
	bytes    atomic.Int64 // BytesDone, updated while streaming
}

// push makes one object present.
func (p *pusher) push(ctx context.Context, u Upload) error {
	ok, err := p.s.Has(ctx, u.SHA256)
	if err != nil {
		return fmt.Errorf("push %s: %w", u.Path, err)
	}
	if ok {
		p.done(u, false)
		return nil
	}
	if p.o.DryRun {
		p.mu.Lock()
		p.stats.WouldUpload = append(p.stats.WouldUpload, u)
		p.mu.Unlock()
		p.done(u, true)
		return nil
	}
	created, err := p.upload(ctx, u)
	if err != nil {
		return err
	}
	p.done(u, created)
	return nil
}

// upload streams u's file into the store.
func (p *pusher) upload(ctx context.Context, u Upload) (bool, error) {
	f, err := os.Open(u.Path)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("push %s: object %s is neither in the store %s nor in the local tree: its release's parent was never pushed there, or the store lost it (armor store check); push from the machine that has the file",
			u.Path, u.SHA256, p.s)
	}
	if err != nil {
		return false, fmt.Errorf("push %s: %w", u.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("push %s: %w", u.Path, err)
	}
	if fi.Size() != u.Size {
		return false, fmt.Errorf("push %s: the file changed since the build: it has %d bytes, the manifest says %d (rebuild): %w",
			u.Path, fi.Size(), u.Size, store.ErrDigestMismatch)
	}
	r := &progressReader{f: f, p: p}
	created, err := p.s.Put(ctx, u.SHA256, u.Size, r)
	// Bytes of a failed or redundant upload do not count as progress.
	p.addBytes(-r.n)
	if errors.Is(err, store.ErrDigestMismatch) {
		return false, fmt.Errorf("push %s: the file changed since the build: its content no longer has sha256 %s (rebuild): %w",
			u.Path, u.SHA256, err)
	}
	if err != nil {
		return false, fmt.Errorf("push %s: %w", u.Path, err)
	}
	return created, nil
}

// done records an object as present; uploaded says whether this UploadMissing put it there (or,
// in a dry run, would).
func (p *pusher) done(u Upload, uploaded bool) {
	p.mu.Lock()
	switch {
	case p.o.DryRun && uploaded:
	case uploaded:
		p.stats.Uploaded++
		p.stats.BytesUploaded += u.Size
	default:
		p.stats.Present++
		p.stats.BytesPresent += u.Size
	}
	p.progress.ObjectsDone++
	p.mu.Unlock()
	p.addBytes(u.Size)
}

func (p *pusher) addBytes(n int64) {
	p.bytes.Add(n)
	if p.o.Progress == nil {
		return
	}
	// Reports are taken and delivered one at a time, so a caller never sees progress go
	// backwards when several uploads finish at once.
	p.reportMu.Lock()
	defer p.reportMu.Unlock()
	p.mu.Lock()
	pr := p.progress
	p.mu.Unlock()
	pr.BytesDone = p.bytes.Load()
	p.o.Progress(pr)
}

// progressReader reports the bytes read from an upload's file. It keeps the file's
// io.Seeker so that a retrying store can rewind it.
type progressReader struct {
	f *os.File
	p *pusher
	n int64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if n > 0 {
		r.n += int64(n)
		r.p.addBytes(int64(n))
	}
	return n, err
}

func (r *progressReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := r.f.Seek(offset, whence)
	if err == nil {
		r.p.addBytes(pos - r.n)
		r.n = pos
	}
	return pos, err
}

var _ io.ReadSeeker = (*progressReader)(nil)
