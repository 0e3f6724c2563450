package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/store"
)

// Object is test content with its digest.
type Object struct {
	Data []byte
	Sum  string
}

// NewObject returns the object holding data.
func NewObject(data []byte) Object {
	h := sha256.Sum256(data)
	return Object{Data: data, Sum: hex.EncodeToString(h[:])}
}

// RandomObject returns an object of n pseudo-random bytes derived from seed.
func RandomObject(seed uint64, n int) Object {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return NewObject(b)
}

// Run runs the Store contract suite. newStore must return an empty store that is cleaned
// up when t ends; it is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"Missing", testMissing},
		{"PutNew", testPutNew},
		{"PutAgainNotRewritten", testPutAgain},
		{"PutWrongSize", testPutWrongSize},
		{"PutWrongDigest", testPutWrongDigest},
		{"PutReadError", testPutReadError},
		{"InvalidDigest", testInvalidDigest},
		{"Empty", testEmpty},
		{"OpenRanges", testOpenRanges},
		{"Delete", testDelete},
		{"List", testList},
		{"ListStops", testListStops},
		{"ConcurrentPutSame", testConcurrentPut},
		{"Large", testLarge},
		{"Cancelled", testCancelled},
		{"String", testString},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

// Put stores o in s, failing t on error.
func Put(t testing.TB, s store.Store, o Object) bool {
	t.Helper()
	created, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)), bytes.NewReader(o.Data))
	if err != nil {
		t.Fatalf("Put(%s) = %v", o.Sum[:12], err)
	}
	return created
}

// Read returns the object's bytes [offset, offset+length) from s.
func Read(t testing.TB, s store.Store, sum string, offset, length int64) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), sum, offset, length)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d) = %v", sum[:12], offset, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", sum[:12], err)
	}
	return b
}

// AssertContent checks that s holds exactly o.
func AssertContent(t testing.TB, s store.Store, o Object) {
	t.Helper()
	info, err := s.Stat(context.Background(), o.Sum)
	if err != nil {
		t.Fatalf("Stat(%s) = %v", o.Sum[:12], err)
	}
	if info.Size != int64(len(o.Data)) || info.SHA256 != o.Sum {
		t.Fatalf("Stat(%s) = %+v, want size %d", o.Sum[:12], info, len(o.Data))
	}
	if got := Read(t, s, o.Sum, 0, -1); !bytes.Equal(got, o.Data) {
		t.Fatalf("content of %s: got %d bytes (sha256 %s), want %d bytes", o.Sum[:12], len(got), NewObject(got).Sum[:12], len(o.Data))
	}
}

// AssertAbsent checks that s does not hold sum, through Has, Stat and Open.
func AssertAbsent(t testing.TB, s store.Store, sum string) {
	t.Helper()
	ctx := context.Background()
	if ok, err := s.Has(ctx, sum); ok || err != nil {
		t.Fatalf("Has(%s) = %v, %v; want false, nil", sum[:12], ok, err)
	}
	if _, err := s.Stat(ctx, sum); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat(%s) = %v; want ErrNotFound", sum[:12], err)
	}
	if rc, err := s.Open(ctx, sum, 0, -1); !errors.Is(err, store.ErrNotFound) {
		if rc != nil {
			rc.Close()
		}
		t.Fatalf("Open(%s) = %v; want ErrNotFound", sum[:12], err)
	}
}

func testMissing(t *testing.T, s store.Store) {
	AssertAbsent(t, s, NewObject([]byte("never stored")).Sum)
}

func testPutNew(t *testing.T, s store.Store) {
	o := NewObject([]byte("hello, armor\n"))
	if !Put(t, s, o) {
		t.Fatal("Put of a new object reported created=false")
	}
	if ok, err := s.Has(context.Background(), o.Sum); !ok || err != nil {
		t.Fatalf("Has after Put = %v, %v", ok, err)
	}
	AssertContent(t, s, o)
}

func testPutAgain(t *testing.T, s store.Store) {
	o := NewObject([]byte("stored once"))
	Put(t, s, o)
	if Put(t, s, o) {
		t.Fatal("second Put reported created=true")
	}
	// Even wrong bytes under an existing digest never replace the object: Put does not
	// read them.
	created, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)), strings.NewReader("evil twin!!"))
	if created || err != nil {
		t.Fatalf("Put over existing object = %v, %v; want false, nil", created, err)
	}
	AssertContent(t, s, o)
}

func testPutWrongSize(t *testing.T, s store.Store) {
	o := NewObject([]byte("twelve bytes"))
	tests := []struct {
		name string
		size int64
		data []byte
	}{
		{"declared shorter", int64(len(o.Data)) - 1, o.Data},
		{"declared longer", int64(len(o.Data)) + 1, o.Data},
		{"reader longer", int64(len(o.Data)), append(bytes.Clone(o.Data), '!')},
		{"reader shorter", int64(len(o.Data)), o.Data[:5]},
		{"negative", -1, o.Data},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			created, err := s.Put(context.Background(), o.Sum, tc.size, bytes.NewReader(tc.data))
			if created || !errors.Is(err, store.ErrDigestMismatch) {
				t.Fatalf("Put = %v, %v; want false, ErrDigestMismatch", created, err)
			}
			if !strings.Contains(err.Error(), o.Sum) {
				t.Errorf("error %q does not name the digest", err)
			}
			AssertAbsent(t, s, o.Sum)
		})
	}
}

func testPutWrongDigest(t *testing.T, s store.Store) {
	want := NewObject([]byte("the real content"))
	fake := []byte("the fake content")
	created, err := s.Put(context.Background(), want.Sum, int64(len(fake)), bytes.NewReader(fake))
	if created || !errors.Is(err, store.ErrDigestMismatch) {
		t.Fatalf("Put = %v, %v; want false, ErrDigestMismatch", created, err)
	}
	AssertAbsent(t, s, want.Sum)
	// The right content can be stored afterwards. A server may answer a transient error
	// while it cleans up after the aborted upload (rclone serve s3 does), which is what
	// WithRetry is for.
	if !Put(t, store.WithRetry(s, 3, 20*time.Millisecond), want) {
		t.Fatal("Put of the right content after a mismatch reported created=false")
	}
	AssertContent(t, s, want)
}

// errReader fails after giving n bytes.
type errReader struct {
	r io.Reader
}

var errBroken = errors.New("broken source")

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, errBroken
	}
	return n, err
}

func testPutReadError(t *testing.T, s store.Store) {
	o := RandomObject(7, 100<<10)
	created, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)),
		&errReader{bytes.NewReader(o.Data[:50<<10])})
	if created || err == nil {
		t.Fatalf("Put from a failing reader = %v, %v; want an error", created, err)
	}
	if errors.Is(err, store.ErrDigestMismatch) {
		t.Errorf("Put from a failing reader = %v; a read error is not a digest mismatch", err)
	}
	AssertAbsent(t, s, o.Sum)
}

func testInvalidDigest(t *testing.T, s store.Store) {
	ctx := context.Background()
	good := NewObject([]byte("x")).Sum
	for name, sum := range map[string]string{
		"empty":     "",
		"uppercase": strings.ToUpper(good),
		"short":     good[:63],
		"long":      good + "0",
		"not hex":   "g" + good[1:],
		"traversal": "../../../../etc/passwd" + good[22:],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Has(ctx, sum); !errors.Is(err, store.ErrInvalidDigest) {
				t.Errorf("Has = %v, want ErrInvalidDigest", err)
			}
			if _, err := s.Stat(ctx, sum); !errors.Is(err, store.ErrInvalidDigest) {
				t.Errorf("Stat = %v, want ErrInvalidDigest", err)
			}
			if _, err := s.Put(ctx, sum, 1, strings.NewReader("x")); !errors.Is(err, store.ErrInvalidDigest) {
				t.Errorf("Put = %v, want ErrInvalidDigest", err)
			}
			if _, err := s.Open(ctx, sum, 0, -1); !errors.Is(err, store.ErrInvalidDigest) {
				t.Errorf("Open = %v, want ErrInvalidDigest", err)
			}
			if err := s.Delete(ctx, sum); !errors.Is(err, store.ErrInvalidDigest) {
				t.Errorf("Delete = %v, want ErrInvalidDigest", err)
			}
		})
	}
}

func testEmpty(t *testing.T, s store.Store) {
	o := NewObject(nil)
	bad := NewObject([]byte("not empty"))
	if _, err := s.Put(context.Background(), bad.Sum, 0, strings.NewReader("")); !errors.Is(err, store.ErrDigestMismatch) {
		t.Fatalf("Put of empty content under another digest = %v, want ErrDigestMismatch", err)
	}
	AssertAbsent(t, s, bad.Sum)
	if !Put(t, s, o) {
		t.Fatal("Put of the empty object reported created=false")
	}
	AssertContent(t, s, o)
}

func testOpenRanges(t *testing.T, s store.Store) {
	o := NewObject([]byte("0123456789abcdefghij"))
	Put(t, s, o)
	n := int64(len(o.Data))
	tests := []struct {
		name           string
		offset, length int64
		want           string
	}{
		{"full", 0, -1, string(o.Data)},
		{"full explicit", 0, n, string(o.Data)},
		{"prefix", 0, 4, "0123"},
		{"middle", 10, 6, "abcdef"},
		{"suffix", 15, -1, "fghij"},
		{"last byte", n - 1, 1, "j"},
		{"length past end", 18, 100, "ij"},
		{"zero length", 5, 0, ""},
		{"at end", n, -1, ""},
		{"beyond end", n + 10, 5, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Read(t, s, o.Sum, tc.offset, tc.length); string(got) != tc.want {
				t.Errorf("Open(%d, %d) read %q, want %q", tc.offset, tc.length, got, tc.want)
			}
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		rc, err := s.Open(context.Background(), o.Sum, -1, 2)
		if err == nil {
			rc.Close()
			t.Fatal("Open with a negative offset succeeded")
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Open with a negative offset = %v; it is not ErrNotFound", err)
		}
	})
}

func testDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := NewObject([]byte("delete me")), NewObject([]byte("keep me"))
	Put(t, s, a)
	Put(t, s, b)
	if err := s.Delete(ctx, a.Sum); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	AssertAbsent(t, s, a.Sum)
	AssertContent(t, s, b)
	if err := s.Delete(ctx, a.Sum); err != nil {
		t.Fatalf("Delete of a missing object = %v, want nil", err)
	}
	if !Put(t, s, a) {
		t.Fatal("Put after Delete reported created=false")
	}
	AssertContent(t, s, a)
}

// List returns every object with its size and a modification time from when it was put.
func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got := List(t, s); len(got) != 0 {
		t.Fatalf("List of an empty store = %v, want nothing", got)
	}
	before := time.Now()
	a, b, gone := NewObject([]byte("list me")), NewObject(nil), NewObject([]byte("deleted"))
	for _, o := range []Object{a, b, gone} {
		Put(t, s, o)
	}
	if err := s.Delete(ctx, gone.Sum); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got := List(t, s)
	if len(got) != 2 {
		t.Fatalf("List = %v, want %s and %s", got, a.Sum[:12], b.Sum[:12])
	}
	for _, o := range []Object{a, b} {
		l, ok := got[o.Sum]
		if !ok {
			t.Fatalf("List = %v, misses %s", got, o.Sum[:12])
		}
		if l.Size != int64(len(o.Data)) {
			t.Errorf("List: %s has size %d, want %d", o.Sum[:12], l.Size, len(o.Data))
		}
		// Stores keep whole seconds (S3's Last-Modified): allow that much either side.
		if l.ModTime.Before(before.Add(-2*time.Second)) || l.ModTime.After(after.Add(2*time.Second)) {
			t.Errorf("List: %s was modified at %v, not while it was put (%v to %v)", o.Sum[:12], l.ModTime, before, after)
		}
	}
}

// An error from the callback stops List and is what it returns.
func testListStops(t *testing.T, s store.Store) {
	for i := range 3 {
		Put(t, s, NewObject([]byte{byte(i)}))
	}
	stop := errors.New("stop here")
	calls := 0
	err := s.List(context.Background(), func(store.Listed) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("List whose callback fails = %v after %d calls; want %v after 1", err, calls, stop)
	}
}

// List returns every object of s by digest, failing t on error or a repeated digest.
func List(t testing.TB, s store.Store) map[string]store.Listed {
	t.Helper()
	out := map[string]store.Listed{}
	err := s.List(context.Background(), func(l store.Listed) error {
		if _, dup := out[l.SHA256]; dup {
			return fmt.Errorf("%s listed twice", l.SHA256)
		}
		out[l.SHA256] = l
		return nil
	})
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	return out
}

func testConcurrentPut(t *testing.T, s store.Store) {
	o := RandomObject(1, 256<<10)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	created := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			created[i], errs[i] = s.Put(context.Background(), o.Sum, int64(len(o.Data)), bytes.NewReader(o.Data))
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Put %d = %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated < 1 {
		t.Errorf("no concurrent Put reported created=true")
	}
	AssertContent(t, s, o)
	// Interleaved puts of different objects all land.
	objs := make([]Object, 16)
	for i := range objs {
		objs[i] = RandomObject(uint64(100+i), 1000+i)
	}
	for _, o := range objs {
		wg.Go(func() {
			if _, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)), bytes.NewReader(o.Data)); err != nil {
				t.Errorf("Put(%s) = %v", o.Sum[:12], err)
			}
		})
	}
	wg.Wait()
	for _, o := range objs {
		AssertContent(t, s, o)
	}
}

// slowReader hands out at most 64 KiB per Read, to stream through small buffers.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	return s.r.Read(p)
}

func testLarge(t *testing.T, s store.Store) {
	o := RandomObject(2, 6<<20+12345)
	created, err := s.Put(context.Background(), o.Sum, int64(len(o.Data)), slowReader{bytes.NewReader(o.Data)})
	if !created || err != nil {
		t.Fatalf("Put of %d bytes = %v, %v", len(o.Data), created, err)
	}
	AssertContent(t, s, o)
	off := int64(3<<20 + 7)
	if got := Read(t, s, o.Sum, off, 1<<20); !bytes.Equal(got, o.Data[off:off+1<<20]) {
		t.Fatalf("range of the large object differs")
	}
	// A large object whose last byte is wrong is refused and leaves nothing behind.
	bad := bytes.Clone(o.Data)
	bad[len(bad)-1] ^= 1
	wrong := RandomObject(3, len(bad))
	created, err = s.Put(context.Background(), wrong.Sum, int64(len(bad)), slowReader{bytes.NewReader(bad)})
	if created || !errors.Is(err, store.ErrDigestMismatch) {
		t.Fatalf("Put of a large mismatching object = %v, %v", created, err)
	}
	AssertAbsent(t, s, wrong.Sum)
}

func testCancelled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := NewObject([]byte("cancelled"))
	if _, err := s.Put(ctx, o.Sum, int64(len(o.Data)), bytes.NewReader(o.Data)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Has(ctx, o.Sum); !errors.Is(err, context.Canceled) {
		t.Fatalf("Has with a cancelled context = %v, want context.Canceled", err)
	}
	AssertAbsent(t, s, o.Sum)
}

func testString(t *testing.T, s store.Store) {
	name := s.String()
	if name == "" {
		t.Fatal("String() is empty")
	}
	for _, secret := range []string{"secret", "SECRET"} {
		if strings.Contains(name, secret) {
			t.Errorf("String() = %q shows a credential", name)
		}
	}
	_ = fmt.Sprint(s)
}

// CheckHolds fails t unless s holds every object of objects (digest → size), each with
// its size and content.
func CheckHolds(t testing.TB, s store.Store, objects map[string]int64) {
	t.Helper()
	ctx := context.Background()
	for sum, size := range objects {
		rc, err := s.Open(ctx, sum, 0, -1)
		if err != nil {
			t.Errorf("store lacks %s: %v", sum, err)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != sum {
			t.Errorf("object %s in the store: %d bytes (want %d), sha256 %x, err %v", sum, n, size, h.Sum(nil), err)
		}
	}
}
