package gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
)

// TestKeptPlain: a kept uncompressed index comes back with room for a splice in place;
// a copy torn, damaged or of another size does not come back at all.
func TestKeptPlain(t *testing.T) {
	cache := t.TempDir()
	data := bytes.Repeat([]byte("Package: p\nVersion: 1\n\n"), 1000)
	d := digestsOf(data)
	keepPlain(cache, d.SHA256, data)
	got, ok := keptPlain(cache, d)
	if !ok || !bytes.Equal(got, data) || cap(got) < index.PlainCap(len(data)) {
		t.Fatalf("kept copy: ok %v, equal %v, capacity %d (want %d)", ok, bytes.Equal(got, data), cap(got), index.PlainCap(len(data)))
	}
	file := filepath.Join(plainDir(cache), d.SHA256)
	kept, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, damaged := range map[string][]byte{
		"a byte changed": damage(kept),
		"zeros":          make([]byte, len(kept)), // the blocks of a write a crash lost
		"torn":           kept[:len(kept)-3],
	} {
		if err := os.WriteFile(file, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := keptPlain(cache, d); ok {
			t.Errorf("%s: the damaged copy came back", name)
		}
	}
	// The index kept again replaces a damaged copy.
	if err := os.WriteFile(file, damage(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	keepPlain(cache, d.SHA256, data)
	if _, ok := keptPlain(cache, d); !ok {
		t.Error("a damaged copy was not replaced")
	}
	d.Size++
	if _, ok := keptPlain(cache, d); ok {
		t.Error("a copy of another size came back")
	}
}

// damage returns b with its middle byte changed.
func damage(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)/2] ^= 1
	return b
}

// TestKeepPlainOver: an index spliced in place from the parent's kept copy is kept by
// rewriting that copy from where they differ: the file (its inode) is the parent's, it
// reads back as the new index, and nothing else is left. A copy the new Release still
// lists, one claimed by another index, or one whose start is not the new index's is not
// rewritten into a wrong copy.
func TestKeepPlainOver(t *testing.T) {
	stanzas := func(from, to int) []byte {
		var b []byte
		for i := from; i < to; i++ {
			b = fmt.Appendf(b, "Package: p%04d\nVersion: 1\n\n", i)
		}
		return b
	}
	const path = "dists/s/main/binary-amd64/Packages"
	old := stanzas(0, 1000)
	// One stanza inserted after the 600th: the first 600 stay where they were.
	grown := slices.Concat(stanzas(0, 600), []byte("Package: new\nVersion: 2\n\n"), stanzas(600, 1000))
	shrunk := slices.Concat(stanzas(0, 300), stanzas(301, 1000))
	same := len(stanzas(0, 600))

	for _, tc := range []struct {
		name    string
		data    []byte
		same    int
		prepare func(cache, oldSum string)
		rewrite bool // the parent's file becomes the new copy
	}{
		{name: "grown", data: grown, same: same, rewrite: true},
		{name: "shrunk", data: shrunk, same: len(stanzas(0, 300)), rewrite: true},
		{name: "the parent's copy is gone", data: grown, same: same, prepare: func(cache, oldSum string) {
			os.Remove(filepath.Join(plainDir(cache), oldSum))
		}},
		{name: "the parent's copy changed at its start", data: grown, same: same, prepare: func(cache, oldSum string) {
			f := filepath.Join(plainDir(cache), oldSum)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b[3] ^= 1
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			oldSum := digestsOf(old).SHA256
			keepPlain(cache, oldSum, old)
			// Held open, the parent's file keeps its inode number from another's.
			held, err := os.Open(filepath.Join(plainDir(cache), oldSum))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			before, err := held.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(cache, oldSum)
			}
			par := &parent{}
			par.noteBase(path, index.Base{SHA256: oldSum, Head: tc.same})
			d := digestsOf(tc.data)
			keepPlains(dirs{cache: cache}, nil, par, []plainIndex{{path, d.SHA256, tc.data}}, []suiteIndexes{{sums: map[string]release.Digests{
				"main/binary-amd64/Packages": d,
			}}})
			got, ok := keptPlain(cache, d)
			changedStart := strings.HasSuffix(tc.name, "at its start")
			if ok != !changedStart || ok && !bytes.Equal(got, tc.data) {
				t.Fatalf("kept copy: ok %v, equal %v", ok, bytes.Equal(got, tc.data))
			}
			if ok {
				after, err := os.Stat(filepath.Join(plainDir(cache), d.SHA256))
				if err != nil {
					t.Fatal(err)
				}
				if os.SameFile(before, after) != tc.rewrite {
					t.Errorf("the parent's file was rewritten: %v, want %v", os.SameFile(before, after), tc.rewrite)
				}
			}
			entries, err := os.ReadDir(plainDir(cache))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != d.SHA256 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("the cache keeps %v, want only %s", names, d.SHA256)
			}
		})
	}

	// Two indexes spliced from one copy (two suites with equal indexes): one rewrites it,
	// the other is written whole. A copy the new Release still lists stays as it is.
	cache := t.TempDir()
	oldSum := digestsOf(old).SHA256
	keepPlain(cache, oldSum, old)
	par := &parent{}
	par.noteBase(path, index.Base{SHA256: oldSum, Head: same})
	par.noteBase("dists/t/main/binary-amd64/Packages", index.Base{SHA256: oldSum, Head: same})
	dg, ds := digestsOf(grown), digestsOf(shrunk)
	keepPlains(dirs{cache: cache}, nil, par, []plainIndex{{path, dg.SHA256, grown}, {"dists/t/main/binary-amd64/Packages", ds.SHA256, shrunk}},
		[]suiteIndexes{{sums: map[string]release.Digests{"main/binary-amd64/Packages": dg}}, {sums: map[string]release.Digests{"main/binary-amd64/Packages": ds}}})
	for _, x := range []struct {
		d    release.Digests
		data []byte
	}{{dg, grown}, {ds, shrunk}} {
		if got, ok := keptPlain(cache, x.d); !ok || !bytes.Equal(got, x.data) {
			t.Errorf("two indexes from one copy: kept %v, equal %v", ok, bytes.Equal(got, x.data))
		}
	}
	keepPlain(cache, oldSum, old)
	par.noteBase(path, index.Base{SHA256: oldSum, Head: same})
	keepPlains(dirs{cache: cache}, nil, par, []plainIndex{{path, dg.SHA256, grown}}, []suiteIndexes{{sums: map[string]release.Digests{
		"main/binary-amd64/Packages": dg, "main/binary-i386/Packages": digestsOf(old),
	}}})
	for _, x := range []struct {
		d    release.Digests
		data []byte
	}{{dg, grown}, {digestsOf(old), old}} {
		if got, ok := keptPlain(cache, x.d); !ok || !bytes.Equal(got, x.data) {
			t.Errorf("a copy still listed: kept %v, equal %v", ok, bytes.Equal(got, x.data))
		}
	}
}
