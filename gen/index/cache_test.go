package index

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// entries returns the names of the cache entries in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestCacheRejectsDamagedEntries(t *testing.T) {
	stanzas := synthStanzas(200, 21)
	want := mustBuild(t, stanzas, nil, small)
	tests := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"empty file", func([]byte) []byte { return nil }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"payload byte flipped", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"aux changed", func(b []byte) []byte { b[len(b)-trailerSize] ^= 1; return b }},
		{"no magic", func(b []byte) []byte { copy(b[len(b)-4:], "XXXX"); return b }},
		{"other entry's bytes", nil}, // intact trailer, wrong content: gz of one chunk under another's name
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustBuild(t, stanzas, openCache(t, dir), small)
			names := entries(t, dir)
			var gz []string
			for _, n := range names {
				if strings.HasSuffix(n, kindGzip) {
					gz = append(gz, n)
				}
			}
			victim := filepath.Join(dir, gz[0])
			b, err := os.ReadFile(victim)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				b = tc.damage(b)
			} else if b, err = os.ReadFile(filepath.Join(dir, gz[1])); err != nil {
				t.Fatal(err)
			}
			writeFile(t, victim, b)

			c := openCache(t, dir)
			got := mustBuild(t, stanzas, c, small)
			sameBytes(t, "gzip", got.Gzip, want.Gzip)
			sameBytes(t, "xz", got.Xz, want.Xz)
			if s := c.Stats(); s.Misses != 1 {
				t.Errorf("stats %+v: want the damaged entry recompressed, nothing else", s)
			}
			c = openCache(t, dir)
			mustBuild(t, stanzas, c, small)
			if s := c.Stats(); s.Misses != 0 || s.Corrupt != 0 {
				t.Errorf("after rewrite, stats %+v: want all hits", s)
			}
		})
	}
}

// age sets the mtime of the named files in dir to d ago.
func age(t *testing.T, dir string, d time.Duration, names ...string) {
	t.Helper()
	old := time.Now().Add(-d)
	for _, n := range names {
		if err := os.Chtimes(filepath.Join(dir, n), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCachePrune(t *testing.T) {
	a := synthStanzas(300, 31)
	b := slices.Clone(a[:150]) // shares its first chunks with a
	tests := []struct {
		name     string
		keepA    bool // the session reuses index a unchanged and calls Keep
		aAge     time.Duration
		wantAAll bool // all of a's entries survive
	}{
		{"unused and old", false, keepFor + time.Hour, false},
		{"unused but recent", false, 3 * 24 * time.Hour, true},
		{"old but kept", true, keepFor + time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fa := mustBuild(t, a, openCache(t, dir), small)
			age(t, dir, tc.aAge, entries(t, dir)...)
			writeFile(t, filepath.Join(dir, tmpPre+"stale"), []byte("x"))
			writeFile(t, filepath.Join(dir, tmpPre+"fresh"), []byte("x"))
			age(t, dir, 2*staleTemp, tmpPre+"stale")

			c := openCache(t, dir)
			fb := mustBuild(t, b, c, small)
			if s := c.Stats(); s.Misses == 0 || s.Hits == 0 {
				t.Fatalf("stats %+v: b should reuse some of a's chunks and add its own", s)
			}
			if tc.keepA {
				c.Keep(fa.Entries)
			}
			if err := c.Prune(); err != nil {
				t.Fatal(err)
			}
			kept := entries(t, dir)
			if slices.Contains(kept, tmpPre+"stale") || !slices.Contains(kept, tmpPre+"fresh") {
				t.Errorf("temp files after prune: want the stale one gone, the fresh one kept")
			}
			for _, n := range fb.Entries {
				info, err := os.Stat(filepath.Join(dir, n))
				if err != nil {
					t.Fatalf("entry of b pruned: %v", err)
				}
				if time.Since(info.ModTime()) > touchAfter {
					t.Errorf("entry %s used by b was not touched: mtime %v", n, info.ModTime())
				}
			}
			missing := 0
			for _, n := range fa.Entries {
				if !slices.Contains(kept, n) {
					missing++
				}
			}
			if tc.wantAAll && missing > 0 || !tc.wantAAll && missing == 0 {
				t.Errorf("%d of a's %d entries pruned; want all kept: %v", missing, len(fa.Entries), tc.wantAAll)
			}
			c = openCache(t, dir)
			mustBuild(t, a, c, small)
			if s := c.Stats(); (s.Misses == 0) != tc.wantAAll {
				t.Errorf("rebuilding a after prune: stats %+v", s)
			}
		})
	}
}

// TestCacheConcurrentBuilds builds different indexes sharing one cache at the same time (run
// with -race).
func TestCacheConcurrentBuilds(t *testing.T) {
	c := openCache(t, t.TempDir())
	inputs := [][][]byte{synthStanzas(150, 41), synthStanzas(150, 41)[:100], synthStanzas(120, 42)}
	var wg sync.WaitGroup
	got := make([]*Files, len(inputs))
	errs := make([]error, len(inputs))
	for i, in := range inputs {
		wg.Go(func() { got[i], errs[i] = build(in, c, testName, small, nil) }) // one state for all
	}
	wg.Wait()
	for i, in := range inputs {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		want := mustBuild(t, in, nil, small)
		if !bytes.Equal(got[i].Xz, want.Xz) || !bytes.Equal(got[i].Gzip, want.Gzip) || got[i].Digests != want.Digests {
			t.Errorf("build %d differs from a build without cache", i)
		}
	}
}

// decodeEntry checks a whole the entry called name and splits it into payload and aux.
func decodeEntry(name string, b []byte) (payload []byte, aux uint64, ok bool) {
	if len(b) < trailerSize {
		return nil, 0, false
	}
	t := len(b) - trailerSize
	aux, ok = checkTrailer(name, b[:t], b[t:])
	if !ok {
		return nil, 0, false
	}
	return b[:t:t], aux, true
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add("a.gz9.1", encodeEntry("a.gz9.1", []byte("payload"), 7))
	f.Add("b", encodeEntry("b", nil, 0))
	f.Add("c", encodeEntry("b", nil, 0))
	f.Add("", []byte("AIX1"))
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		payload, aux, ok := decodeEntry(name, b)
		if ok {
			// Whatever decodes must be exactly what encodeEntry writes for it.
			if again := encodeEntry(name, payload, aux); !bytes.Equal(again, b) {
				t.Errorf("decodeEntry accepted %x, which re-encodes as %x", b, again)
			}
		}
		// The cache's reader agrees with decodeEntry on the same bytes on disk.
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return
		}
		c := openCache(t, t.TempDir())
		if err := os.WriteFile(filepath.Join(c.dir, name), b, 0o644); err != nil {
			return // a name the file system refuses
		}
		size, found := c.size(name)
		if !found {
			if ok {
				t.Fatalf("size: entry %x not found", b)
			}
			return
		}
		dst := make([]byte, size)
		m, gotOK, err := c.readInto(name, dst)
		if err != nil {
			t.Fatalf("readInto: %v", err)
		}
		if gotOK != ok || ok && (m.aux != aux || !bytes.Equal(dst, payload)) {
			t.Errorf("readInto = %d, %v; decodeEntry = %d, %v", m.aux, gotOK, aux, ok)
		}
		if ok && m.crc != entryCRC(name, b[:len(b)-trailerSize+8]) {
			t.Errorf("readInto crc %08x is not the entry's check", m.crc)
		}
	})
}
