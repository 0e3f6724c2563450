package edged

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// An object whose bytes do not hash to its name is never served (invariant 9): the
// store may be written by whoever holds its credentials. Objects up to stream_threshold
// are held in memory, checked before they are cached (objects.go). A larger one (a big
// pool file) is fetched into a file of the disk cache while it is hashed, and served
// from that file only once its size and SHA-256 are its name's: a mismatch is a 502,
// logged, and the file is removed. The disk cache keeps verified objects by their
// SHA-256 under disk_cache, up to disk_cache_size, least recently used out first; an
// object larger than the whole cache is served from an unlinked temporary file. Range
// requests (apt resuming a download) read the verified file.

// diskCache is the verified cache of large objects on disk.
type diskCache struct {
	dir     string
	max     int64
	temp    bool // dir was made for this edge, and is removed by close
	store   store.Store
	timeout time.Duration
	base    context.Context
	m       *metrics
	logger  *slog.Logger
	flights singleflight.Group

	mu    sync.Mutex
	files map[string]*diskFile // by SHA-256
	total int64
}

type diskFile struct {
	size int64
	used time.Time
}

// diskTempPrefix starts the names of files being fetched; they are removed at start.
const diskTempPrefix = ".fetch-"

// newDiskCache opens the cache in dir (a temporary directory when dir is ""), taking the
// objects already there as verified: each was renamed into place only after its check.
func newDiskCache(base context.Context, dir string, max int64, cas store.Store, timeout time.Duration, m *metrics, logger *slog.Logger) (*diskCache, error) {
	d := &diskCache{dir: dir, max: max, store: cas, timeout: timeout, base: base, m: m, logger: logger, files: map[string]*diskFile{}}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "armor-edged-objects-")
		if err != nil {
			return nil, fmt.Errorf("create the disk cache: %w", err)
		}
		d.dir, d.temp = tmp, true
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the disk cache: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the disk cache: %w", err)
	}
	for _, ent := range entries {
		name := ent.Name()
		if strings.HasPrefix(name, diskTempPrefix) || strings.HasPrefix(name, atomicfile.TempPrefix) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		info, err := ent.Info()
		if err != nil || !ent.Type().IsRegular() || !manifest.ValidDigest(name) {
			continue
		}
		d.files[name] = &diskFile{size: info.Size(), used: info.ModTime()}
		d.total += info.Size()
	}
	d.mu.Lock()
	d.evict("")
	d.mu.Unlock()
	return d, nil
}

// open returns the verified object, fetching it first if the cache lacks it. The caller
// closes the file.
func (d *diskCache) open(sum string, size int64) (*os.File, error) {
	if f := d.cached(sum, size); f != nil {
		d.m.hits.Inc()
		return f, nil
	}
	d.m.misses.Inc()
	if size > d.max {
		return d.fetch(sum, size, false) // larger than the whole cache: this request's own copy
	}
	if _, err, _ := d.flights.Do(sum, func() (any, error) {
		if d.has(sum, size) {
			return nil, nil
		}
		f, err := d.fetch(sum, size, true)
		if f != nil {
			f.Close()
		}
		return nil, err
	}); err != nil {
		return nil, err
	}
	if f := d.cached(sum, size); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("object %s left the disk cache as soon as it was fetched: disk_cache_size is too small", sum)
}

// has reports whether the cache holds the object with its size.
func (d *diskCache) has(sum string, size int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.files[sum]
	return e != nil && e.size == size
}

// cached opens the object if the cache holds it with its size.
func (d *diskCache) cached(sum string, size int64) *os.File {
	d.mu.Lock()
	e := d.files[sum]
	if e != nil {
		e.used = time.Now()
	}
	d.mu.Unlock()
	if e == nil || e.size != size {
		return nil
	}
	f, err := os.Open(filepath.Join(d.dir, sum))
	if err != nil {
		d.forget(sum)
		return nil
	}
	return f
}

// fetch reads the object from the store into a temporary file while hashing it and,
// once it is its name's, keeps it in the cache (keep) or unlinks it; it returns the file,
// open for reading.
func (d *diskCache) fetch(sum string, size int64, keep bool) (*os.File, error) {
	ctx, cancel := context.WithTimeout(d.base, d.timeout)
	defer cancel()
	start := time.Now()
	defer func() { d.m.fetchSeconds.Observe(time.Since(start).Seconds()) }()
	tmp, err := os.CreateTemp(d.dir, diskTempPrefix+sum+"-")
	if err != nil {
		return nil, fmt.Errorf("fetch object %s into the disk cache: %w", sum, err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	fail := func(err error) (*os.File, error) {
		tmp.Close()
		return nil, err
	}
	rc, err := d.store.Open(ctx, sum, 0, -1)
	if err != nil {
		d.m.storeErrors.Inc()
		return fail(fmt.Errorf("fetch object %s: %w", sum, err))
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(rc, size+1))
	if err != nil {
		d.m.storeErrors.Inc()
		return fail(fmt.Errorf("fetch object %s: %w", sum, err))
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != sum {
		d.m.storeErrors.Inc()
		return fail(fmt.Errorf("fetch object %s (%d bytes read, %d expected; sha256 %s): %w", sum, n, size, got, errCorrupt))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("fetch object %s into the disk cache: %w", sum, err))
	}
	if keep {
		// Kept only once it is on disk: a crash must not leave a short file under the name.
		if err := tmp.Sync(); err != nil {
			return fail(fmt.Errorf("keep object %s in the disk cache: %w", sum, err))
		}
		if err := os.Rename(tmp.Name(), filepath.Join(d.dir, sum)); err != nil {
			return fail(fmt.Errorf("keep object %s in the disk cache: %w", sum, err))
		}
		d.add(sum, size)
	}
	return tmp, nil
}

func (d *diskCache) add(sum string, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.files[sum]; old != nil {
		d.total -= old.size
	}
	d.files[sum] = &diskFile{size: size, used: time.Now()}
	d.total += size
	d.evict(sum)
}

func (d *diskCache) forget(sum string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.files[sum]; e != nil {
		d.total -= e.size
		delete(d.files, sum)
	}
}

// evict removes the least recently used objects but keep until the cache fits its size;
// under d.mu. A file being served stays readable until it is closed.
func (d *diskCache) evict(keep string) {
	for d.total > d.max {
		var oldest string
		var when time.Time
		for sum, e := range d.files {
			if sum != keep && (oldest == "" || e.used.Before(when)) {
				oldest, when = sum, e.used
			}
		}
		if oldest == "" {
			return
		}
		if err := os.Remove(filepath.Join(d.dir, oldest)); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.logger.Warn("remove an object from the disk cache", "sha256", oldest, "err", err)
		}
		d.total -= d.files[oldest].size
		delete(d.files, oldest)
	}
}

func (d *diskCache) close() {
	if d.temp {
		os.RemoveAll(d.dir)
	}
}

// sectionBody serves part of a verified file and closes it when fasthttp is done.
type sectionBody struct {
	*io.SectionReader
	f *os.File
}

func (s *sectionBody) Close() error { return s.f.Close() }
