package inputs

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/armor-apt/armor/internal/atomicfile"
)

func sampleStatCache() *StatCache {
	return &StatCache{
		Entries: []Input{
			{Path: "/r/debs/a_1_amd64.deb", Size: 1200, MtimeNs: 1700000000123456789,
				SHA256: "0f343b0931126a20f133d67c2b018a3b1c2f9e8d6b5a4c3d2e1f0a9b8c7d6e5f",
				Name:   "a", Version: "1:1.0-1", Architecture: "amd64", Source: "a-src"},
			{Path: "/r/debs/b_2_all.deb", Size: 3, MtimeNs: 5,
				SHA256: "1f343b0931126a20f133d67c2b018a3b1c2f9e8d6b5a4c3d2e1f0a9b8c7d6e5f",
				Name:   "b", Version: "2", Architecture: "all"},
		},
		Kept: []string{"dists/stable/main/binary-amd64/by-hash/SHA256/00", "pool/main/a/a/a_0_amd64.deb"},
	}
}

func TestStatCacheRoundTrip(t *testing.T) {
	c := sampleStatCache()
	path := filepath.Join(t.TempDir(), "cache", "inputs.txt")
	if err := atomicfile.WriteFileUnsynced(path, c.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LoadStatCache(path); !reflect.DeepEqual(got, c) {
		t.Fatalf("loaded %+v\nwant %+v", got, c)
	}
	if got := LoadStatCache(filepath.Join(t.TempDir(), "missing")); len(got.Entries) != 0 || len(got.Kept) != 0 {
		t.Fatalf("a missing cache loads as %+v; want it empty", got)
	}
}

// A damaged cache is ignored whole: the next build reads every input again, which
// costs time, never a wrong digest.
func TestStatCacheDamage(t *testing.T) {
	good := sampleStatCache().Encode()
	if _, ok := ParseStatCache(good); !ok {
		t.Fatal("the encoded cache does not parse")
	}
	unsorted := sampleStatCache()
	unsorted.Entries[0], unsorted.Entries[1] = unsorted.Entries[1], unsorted.Entries[0]
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)/2]},
		{"no checksum line", good[:bytes.LastIndex(good, []byte(statCacheTrailer))]},
		{"one digit of a digest changed", bytes.Replace(good, []byte("0f343b"), []byte("0f343c"), 1)},
		{"older format", append([]byte("armor build cache v1\n"), good[len(statCacheHeader):]...)},
		{"entries out of order", unsorted.Encode()},
		{"a line with seven fields", withBody(t, "/p\t1\t2\tsum\tn\tv\tarch\n")},
		{"a size that is not a number", withBody(t, "/p\tx\t2\tsum\tn\tv\tarch\tsrc\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := ParseStatCache(tc.data)
			if ok || len(c.Entries) != 0 || len(c.Kept) != 0 {
				t.Fatalf("parsed as ok %v, %d entries, %d kept; want it ignored", ok, len(c.Entries), len(c.Kept))
			}
		})
	}
}

// withBody returns a cache file with a valid checksum around body.
func withBody(t *testing.T, body string) []byte {
	t.Helper()
	return appendStatCacheSum(append([]byte(statCacheHeader), body...))
}

func FuzzParseStatCache(f *testing.F) {
	f.Add(sampleStatCache().Encode())
	f.Add((&StatCache{}).Encode())
	f.Add([]byte(statCacheHeader))
	f.Add([]byte("armor build cache v3\nK\tpool/x\ncrc32c 00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := ParseStatCache(data)
		if !ok {
			return
		}
		// Whatever parses survives a round trip unchanged.
		again, ok := ParseStatCache(c.Encode())
		if !ok || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %q: ok %v, %+v; want %+v", data, ok, again, c)
		}
		for i := 1; i < len(c.Entries); i++ {
			if c.Entries[i-1].Path >= c.Entries[i].Path {
				t.Fatalf("entries out of order: %q, %q", c.Entries[i-1].Path, c.Entries[i].Path)
			}
		}
	})
}

func TestWriteFileUnsyncedReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for _, data := range []string{"one", "two"} {
		if err := atomicfile.WriteFileUnsynced(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("%d files in the directory; want 1 (no temporary file left)", len(ents))
	}
}
