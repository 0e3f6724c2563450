package edged

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/dgraph-io/ristretto/v2/z"
	"golang.org/x/sync/singleflight"

	"github.com/armor-apt/armor/store"
)

// errCorrupt: the store returned bytes that are not the object (wrong size or digest).
// Nothing is cached.
var errCorrupt = errors.New("store object does not match its digest")

// objects is the object cache in front of the store: a ristretto cache keyed by
// SHA-256 with cost = size, filled on a miss by exactly one store fetch however many
// requests miss at once (singleflight).
type objects struct {
	cache   *ristretto.Cache[string, []byte]
	flights singleflight.Group
	store   store.Store
	timeout time.Duration
	base    context.Context // cancelled when the edge closes
	m       *metrics
}

func newObjects(base context.Context, cas store.Store, size ByteSize, timeout time.Duration, m *metrics) (*objects, error) {
	counters := int64(size/(4*KiB)) * 10
	counters = min(max(counters, 1e4), 1e7)
	c, err := ristretto.NewCache(&ristretto.Config[string, []byte]{
		NumCounters:        counters,
		MaxCost:            int64(size),
		BufferItems:        64,
		IgnoreInternalCost: true,
		KeyToHash:          keyHash,
	})
	if err != nil {
		return nil, fmt.Errorf("create object cache: %w", err)
	}
	return &objects{cache: c, store: cas, timeout: timeout, base: base, m: m}, nil
}

// The cache is keyed by cacheKey(sum), the first 128 bits of the SHA-256 as 16 raw
// bytes, and keyHash takes its two 64-bit halves as the cache's two key hashes: the
// digest is already uniform, so hashing the key again (the default: two hashes of the
// 64-byte hex string on every hit) is wasted work. Ristretto tells items apart by those
// two hashes alone, as it did with the default; routes carry their key precomputed.
func cacheKey(sum string) string {
	var d [32]byte
	if len(sum) != 64 {
		return "x" + sum
	}
	if _, err := hex.Decode(d[:], []byte(sum)); err != nil {
		return "x" + sum
	}
	return string(d[:16])
}

// keyHash is the cache's KeyToHash; keys not made by cacheKey from a hex digest (any
// length but 16) take the default hashes.
func keyHash(k string) (uint64, uint64) {
	if len(k) != 16 {
		return z.KeyToHash(k)
	}
	return le64(k[:8]), le64(k[8:])
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// get returns the whole object, from the cache or, on a miss, from the store; key is
// cacheKey(sum). The returned slice is shared and must not be modified.
func (o *objects) get(key, sum string, size int64) ([]byte, error) {
	if b, ok := o.cache.Get(key); ok {
		o.m.hits.Inc()
		return b, nil
	}
	o.m.misses.Inc()
	return o.fill(key, sum, size)
}

// fill fetches an object into the cache (once, whatever the number of callers); key is
// cacheKey(sum).
func (o *objects) fill(key, sum string, size int64) ([]byte, error) {
	v, err, _ := o.flights.Do(sum, func() (any, error) {
		if b, ok := o.cache.Get(key); ok {
			return b, nil
		}
		b, err := o.fetch(sum, size)
		if err != nil {
			return nil, err
		}
		o.cache.Set(key, b, int64(len(b)))
		o.cache.Wait()
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// cached reports whether the object is in the cache, without counting a hit.
func (o *objects) cached(sum string) bool {
	_, ok := o.cache.Get(cacheKey(sum))
	return ok
}

// has reports whether the object of cache key key is cached, without counting a hit.
func (o *objects) has(key string) bool {
	_, ok := o.cache.Get(key)
	return ok
}

// check reports whether the store can serve an object now, without reading it: the
// answer to a HEAD of an object not in the cache, which must be what a GET would get.
// An object of another size is errCorrupt. Concurrent checks of one object make one
// store request.
func (o *objects) check(sum string, size int64) error {
	_, err, _ := o.flights.Do("stat "+sum, func() (any, error) {
		ctx, cancel := context.WithTimeout(o.base, o.timeout)
		defer cancel()
		info, err := o.store.Stat(ctx, sum)
		if err != nil {
			o.m.storeErrors.Inc()
			return nil, fmt.Errorf("stat object %s: %w", sum, err)
		}
		if info.Size != size {
			o.m.storeErrors.Inc()
			return nil, fmt.Errorf("stat object %s (%d bytes, %d expected): %w", sum, info.Size, size, errCorrupt)
		}
		return nil, nil
	})
	return err
}

// fetch reads a whole object from the store and checks its size and digest.
func (o *objects) fetch(sum string, size int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(o.base, o.timeout)
	defer cancel()
	start := time.Now()
	defer func() { o.m.fetchSeconds.Observe(time.Since(start).Seconds()) }()
	rc, err := o.store.Open(ctx, sum, 0, -1)
	if err != nil {
		o.m.storeErrors.Inc()
		return nil, fmt.Errorf("fetch object %s: %w", sum, err)
	}
	defer rc.Close()
	b := make([]byte, size+1)
	n, err := io.ReadFull(rc, b)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		b = b[:n]
	case err != nil:
		o.m.storeErrors.Inc()
		return nil, fmt.Errorf("fetch object %s: %w", sum, err)
	}
	got := sha256.Sum256(b)
	if int64(len(b)) != size || hex.EncodeToString(got[:]) != sum {
		o.m.storeErrors.Inc()
		return nil, fmt.Errorf("fetch object %s (%d bytes read, %d expected): %w", sum, len(b), size, errCorrupt)
	}
	return b, nil
}

func (o *objects) close() { o.cache.Close() }
