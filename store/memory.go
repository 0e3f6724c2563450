package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Memory is an in-memory Store for tests. The zero value is not usable; call NewMemory.
type Memory struct {
	mu       sync.RWMutex
	objects  map[string][]byte
	modTimes map[string]time.Time
	now      func() time.Time
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return NewMemoryClock(time.Now)
}

// NewMemoryClock returns an empty in-memory store whose objects are stamped with now()
// when they are put, so a test can age them.
func NewMemoryClock(now func() time.Time) *Memory {
	return &Memory{objects: make(map[string][]byte), modTimes: make(map[string]time.Time), now: now}
}

func (m *Memory) get(ctx context.Context, sum string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := checkDigest(sum); err != nil {
		return nil, false, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.objects[sum]
	return b, ok, nil
}

// Has reports whether the object is present.
func (m *Memory) Has(ctx context.Context, sum string) (bool, error) {
	_, ok, err := m.get(ctx, sum)
	return ok, err
}

// Stat returns the object's size.
func (m *Memory) Stat(ctx context.Context, sum string) (Info, error) {
	b, ok, err := m.get(ctx, sum)
	if err != nil {
		return Info{}, err
	}
	if !ok {
		return Info{}, fmt.Errorf("stat %s in %s: %w", sum, m, ErrNotFound)
	}
	return Info{SHA256: sum, Size: int64(len(b))}, nil
}

// Put stores the object unless present, verifying its size and digest.
func (m *Memory) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	_, ok, err := m.get(ctx, sum)
	if err != nil || ok {
		return false, err
	}
	if size < 0 {
		return false, fmt.Errorf("put %s in %s: negative size %d: %w", sum, m, size, ErrDigestMismatch)
	}
	v := newVerifier(ctxReader{ctx, r}, sum, size)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(v); err != nil {
		return false, fmt.Errorf("put %s in %s: %w", sum, m, err)
	}
	if err := v.Verify(); err != nil {
		return false, fmt.Errorf("put %s in %s: %w", sum, m, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[sum]; ok {
		return false, nil
	}
	m.objects[sum] = buf.Bytes()
	m.modTimes[sum] = m.now()
	return true, nil
}

// Open returns a reader of the object's bytes [offset, offset+length), clipped to the
// object.
func (m *Memory) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	b, ok, err := m.get(ctx, sum)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("open %s in %s: %w", sum, m, ErrNotFound)
	}
	start, end, err := clipRange(int64(len(b)), offset, length)
	if err != nil {
		return nil, fmt.Errorf("open %s in %s: %w", sum, m, err)
	}
	return io.NopCloser(bytes.NewReader(b[start:end])), nil
}

// Delete removes the object if present.
func (m *Memory) Delete(ctx context.Context, sum string) error {
	if _, _, err := m.get(ctx, sum); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, sum)
	delete(m.modTimes, sum)
	return nil
}

// List calls fn for every object, on a copy taken first, so fn may use the store.
func (m *Memory) List(ctx context.Context, fn func(Listed) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.RLock()
	all := make([]Listed, 0, len(m.objects))
	for sum, b := range m.objects {
		all = append(all, Listed{SHA256: sum, Size: int64(len(b)), ModTime: m.modTimes[sum]})
	}
	m.mu.RUnlock()
	for _, o := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of stored objects.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.objects)
}

// String names the store.
func (m *Memory) String() string { return "memory" }

// clipRange turns (offset, length) into [start, end) within an object of size bytes:
// length < 0 means to the end, and a range past the end is clipped (possibly to empty).
func clipRange(size, offset, length int64) (start, end int64, err error) {
	if offset < 0 {
		return 0, 0, fmt.Errorf("invalid range: negative offset %d", offset)
	}
	start = min(offset, size)
	end = size
	if length >= 0 && length < size-start {
		end = start + length
	}
	return start, end, nil
}

// ctxReader fails reads once ctx is done, so a long copy stops when it is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
