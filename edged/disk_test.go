package edged

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/armor-apt/armor/store"
)

// TestLargeObjectNeverServedUnverified acts as someone who can write to the store: a
// large pool file (served from the disk cache) replaced by other bytes of the same size
// is answered 502, whole or by range, and leaves nothing in the cache; once the store
// holds the object again it is served, ranges too, from the checked file without asking
// the store again.
func TestLargeObjectNeverServedUnverified(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, func(c *Config) { c.StreamThreshold = 8; c.DiskCache = dir })
	const p = "/pool/main/h/hello/hello_1_amd64.deb"
	obj := f.a.object(p[1:])
	sum := sha(obj)
	forged := append([]byte("X"), obj[1:]...) // the same size, other bytes
	f.store.damaged.Store(sum, forged)
	for _, rng := range []string{"", "bytes=0-3"} {
		hdr := []string{}
		if rng != "" {
			hdr = append(hdr, "Range", rng)
		}
		resp, body := get(t, f.edge.addr, "GET", hostA, p, hdr...)
		wantStatus(t, "forged object "+rng, resp, body, 502)
		if bytes.Contains(body, forged[:4]) {
			t.Fatalf("the forged bytes were served: %q", body)
		}
	}
	if left := files(t, dir); len(left) != 0 {
		t.Fatalf("the disk cache kept %q after a forged object", left)
	}
	f.store.damaged.Delete(sum)
	resp, body := get(t, f.edge.addr, "GET", hostA, p)
	wantStatus(t, "intact object", resp, body, 200)
	if !bytes.Equal(body, obj) {
		t.Fatalf("body %q, want %q", body, obj)
	}
	opens := f.store.openCount(sum)
	resp, body = get(t, f.edge.addr, "GET", hostA, p, "Range", "bytes=2-5")
	wantStatus(t, "range of a cached object", resp, body, 206)
	if !bytes.Equal(body, obj[2:6]) {
		t.Errorf("range body %q, want %q", body, obj[2:6])
	}
	if f.store.openCount(sum) != opens {
		t.Errorf("the store was asked again for an object on disk")
	}
	if left := files(t, dir); !slices.Equal(left, []string{sum}) {
		t.Errorf("disk cache holds %q, want the object", left)
	}
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestDiskCacheBounds: the disk cache keeps at most its size, least recently used out
// first; an object larger than the whole cache is served from a file that is not kept;
// a restart keeps what was verified and drops half-fetched files.
func TestDiskCacheBounds(t *testing.T) {
	ctx := context.Background()
	cas := store.NewMemory()
	var objs [][]byte
	for i := range 4 {
		b := bytes.Repeat([]byte{byte('a' + i)}, 100)
		if i == 3 {
			b = bytes.Repeat([]byte("z"), 400)
		}
		if _, err := cas.Put(ctx, sha(b), int64(len(b)), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, b)
	}
	dir := t.TempDir()
	d, err := newDiskCache(ctx, dir, 250, cas, time.Minute, newMetrics(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	read := func(b []byte) {
		t.Helper()
		f, err := d.open(sha(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	}
	read(objs[0])
	read(objs[1])
	read(objs[0]) // now the most recently used
	read(objs[2]) // evicts objs[1]
	want := []string{sha(objs[0]), sha(objs[2])}
	slices.Sort(want)
	if got := files(t, dir); !slices.Equal(got, want) {
		t.Errorf("cache holds %q, want %q", got, want)
	}
	read(objs[3]) // 400 bytes: larger than the cache
	if got := files(t, dir); !slices.Equal(got, want) {
		t.Errorf("after an oversized object the cache holds %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, diskTempPrefix+"x"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	d2, err := newDiskCache(ctx, dir, 250, cas, time.Minute, newMetrics(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); !slices.Equal(got, want) || d2.total != 200 {
		t.Errorf("after a restart the cache holds %q (%d bytes), want %q", got, d2.total, want)
	}
}
