package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/manifest"
)

// TestHydrateHandsOverPlain: a fresh runner makes the parent's plain Packages of its .gz,
// writes it into the tree (its by-hash copy a link to it) and hands the same bytes to the
// build, which takes them once instead of reading the file back.
func TestHydrateHandsOverPlain(t *testing.T) {
	const rel = "dists/s/main/binary-amd64/Packages"
	var stanzas [][]byte
	for i := range 300 {
		stanzas = append(stanzas, fmt.Appendf(nil, "Package: p%03d\nVersion: 1\nFilename: pool/p%03d.deb\nSHA256: %064d\n", i, i, i))
	}
	f, err := index.Build(stanzas, nil, rel)
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string][]byte{}
	prev := &manifest.Manifest{ID: "parent"}
	for i, data := range [][]byte{f.Plain, f.Gzip, f.Xz} {
		d := f.Digests[i]
		objects[d.SHA256] = data
		prev.Files = append(prev.Files, manifest.File{Path: rel + variants[i], Size: d.Size, SHA256: d.SHA256},
			manifest.File{Path: byHashPath(rel, d.SHA256), Size: d.Size, SHA256: d.SHA256})
	}
	var (
		mu    sync.Mutex // Fetch is called from several goroutines
		asked []string
	)
	o := &Options{TreeDir: t.TempDir(), CacheDir: t.TempDir(), Fetch: func(_ context.Context, sum string) ([]byte, error) {
		mu.Lock()
		asked = append(asked, sum)
		mu.Unlock()
		if data, ok := objects[sum]; ok {
			return data, nil
		}
		return nil, os.ErrNotExist
	}}
	var made madeIndexes
	if err := hydrate(context.Background(), o, prev, &made); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 {
		t.Errorf("fetched %d objects, want the .gz and .xz only", len(asked))
	}
	file := filepath.Join(o.TreeDir, filepath.FromSlash(rel))
	if data, err := os.ReadFile(file); err != nil || string(data) != string(f.Plain) {
		t.Fatalf("the tree's %s is not the parent's (%v)", rel, err)
	}
	// Each content is written once: its by-hash copy is a link to it.
	for i, d := range f.Digests {
		a, err := os.Stat(filepath.Join(o.TreeDir, filepath.FromSlash(rel+variants[i])))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(filepath.Join(o.TreeDir, filepath.FromSlash(byHashPath(rel, d.SHA256))))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, b) {
			t.Errorf("%s%s and its by-hash copy are two files", rel, variants[i])
		}
	}
	// Gone from the tree, the index still comes from hydrate: once.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if x := made.load(o.TreeDir, rel, 1); len(x.stanzas) != len(stanzas) {
		t.Errorf("the build got %d stanzas of hydrate's index, want %d", len(x.stanzas), len(stanzas))
	}
	if x := made.load(o.TreeDir, rel, 1); len(x.stanzas) != 0 {
		t.Errorf("hydrate's index was handed out twice")
	}
}
