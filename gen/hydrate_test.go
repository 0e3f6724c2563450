package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/manifest"
)

// TestHydrateHandsOverPlain: a fresh runner makes the parent's uncompressed Packages of
// its .gz, checked against the size and sum its Release lists, and hands it to the build,
// which takes it once. The tree gets what the parent published, each by-hash copy a link
// to its file: the .gz and .xz, and, of a parent made by an armor that published the
// uncompressed index too, that one.
func TestHydrateHandsOverPlain(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("published-plain=%v", legacy), func(t *testing.T) { testHydrateHandsOverPlain(t, legacy) })
	}
}

func testHydrateHandsOverPlain(t *testing.T, legacy bool) {
	const rel = "dists/s/main/binary-amd64/Packages"
	stanzas, f := testIndex(t, rel, 300)
	objects := map[string][]byte{}
	prev := &manifest.Manifest{ID: "parent"}
	sums := map[string]release.Digests{}
	for i, data := range [][]byte{f.Plain, f.Gzip, f.Xz} {
		d := f.Digests[i]
		sums["main/binary-amd64/Packages"+variants[i]] = d
		if variants[i] == "" && !legacy {
			continue
		}
		objects[d.SHA256] = data
		prev.Files = append(prev.Files, manifest.File{Path: rel + variants[i], Size: d.Size, SHA256: d.SHA256},
			manifest.File{Path: byHashPath(rel, d.SHA256), Size: d.Size, SHA256: d.SHA256})
	}
	relText := release.Make(release.Header{Codename: "s"}, sums)
	relSum := sha256Hex(relText)
	objects[relSum] = relText
	prev.Files = append(prev.Files, manifest.File{Path: "dists/s/Release", Size: int64(len(relText)), SHA256: relSum})
	slices.SortFunc(prev.Files, func(a, b manifest.File) int { return strings.Compare(a.Path, b.Path) })
	var (
		mu    sync.Mutex // Fetch is called from several goroutines
		asked []string
	)
	d := dirs{tree: t.TempDir(), cache: t.TempDir()}
	fetch := func(_ context.Context, sum string, _ int64) ([]byte, error) {
		mu.Lock()
		asked = append(asked, sum)
		mu.Unlock()
		if data, ok := objects[sum]; ok {
			return data, nil
		}
		return nil, os.ErrNotExist
	}
	var made madeIndexes
	if err := hydrate(context.Background(), d, fetch, nil, prev, &made); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 3 {
		t.Errorf("fetched %d objects, want Release, the .gz and .xz only", len(asked))
	}
	file := filepath.Join(d.tree, filepath.FromSlash(rel))
	data, err := os.ReadFile(file)
	switch {
	case legacy && (err != nil || string(data) != string(f.Plain)):
		t.Fatalf("the tree's %s is not the parent's (%v)", rel, err)
	case !legacy && err == nil:
		t.Fatalf("the tree holds %s, which the parent did not publish", rel)
	}
	// Each content is written once: its by-hash copy is a link to it.
	for i, dg := range f.Digests {
		if variants[i] == "" && !legacy {
			continue
		}
		a, err := os.Stat(filepath.Join(d.tree, filepath.FromSlash(rel+variants[i])))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(filepath.Join(d.tree, filepath.FromSlash(byHashPath(rel, dg.SHA256))))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, b) {
			t.Errorf("%s%s and its by-hash copy are two files", rel, variants[i])
		}
	}
	os.Remove(file)
	os.Remove(file + ".gz")
	// Gone from the tree, the index still comes from hydrate: once.
	want := sums["main/binary-amd64/Packages"]
	if x := made.load(d, rel, want); len(x.stanzas) != len(stanzas) {
		t.Errorf("the build got %d stanzas of hydrate's index, want %d", len(x.stanzas), len(stanzas))
	}
	if x := made.load(d, rel, want); len(x.stanzas) != 0 {
		t.Errorf("hydrate's index was handed out twice")
	}
}

// TestCheckAndWriterShareIndex: on a fresh runner the check reads the parent's stanzas
// from the indexes hydrate made, and the index writer then gets those same indexes, not
// a second decompression of the tree's .gz (here removed, so a second read finds none);
// still its own to splice in place, since the check's map is gone by then. A package
// copied between indexes (stanzaElsewhere, during the writing) shares them instead.
func TestCheckAndWriterShareIndex(t *testing.T) {
	const rel = "dists/s/main/binary-amd64/Packages"
	stanzas, f := testIndex(t, rel, 50)
	for _, copied := range []bool{false, true} {
		t.Run(fmt.Sprintf("copied=%v", copied), func(t *testing.T) {
			var made madeIndexes
			made.add(rel, slices.Clone(f.Plain), false)
			d := dirs{tree: t.TempDir(), cache: t.TempDir()}
			par := &parent{m: &manifest.Manifest{ID: "parent"}, made: &made, dirs: d,
				plains: map[string]release.Digests{rel: f.Digests[0]}}
			pkg := &manifest.Package{Path: "pool/p007.deb", SHA256: fmt.Sprintf("%064d", 7)}
			if st := stanzaOf(par.loadIndexes(), pkg); string(st) != string(stanzas[7]) {
				t.Fatalf("the check got stanza %q, want %q", st, stanzas[7])
			}
			if copied && par.stanzaElsewhere(pkg) == nil {
				t.Fatal("stanzaElsewhere found no stanza for a package the parent lists")
			}
			x := readOldIndex(par, rel, nil)
			if len(x.stanzas) != len(stanzas) {
				t.Fatalf("the writer got %d stanzas of the parent's index, want %d: it was read twice", len(x.stanzas), len(stanzas))
			}
			if x.own == copied {
				t.Errorf("own = %v after the check (copied = %v): a map that points into the index must keep the writer from splicing it in place, and only then", x.own, copied)
			}
		})
	}
}

// testIndex builds the index at rel of n stanzas p000, p001…, each naming its pool file
// and a SHA256 of its number.
func testIndex(t *testing.T, rel string, n int) ([][]byte, *index.Files) {
	t.Helper()
	var stanzas [][]byte
	for i := range n {
		stanzas = append(stanzas, fmt.Appendf(nil, "Package: p%03d\nVersion: 1\nFilename: pool/p%03d.deb\nSHA256: %064d\n", i, i, i))
	}
	f, err := index.Build(stanzas, nil, rel)
	if err != nil {
		t.Fatal(err)
	}
	return stanzas, f
}
