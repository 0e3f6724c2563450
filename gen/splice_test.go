package gen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
)

// TestSplice: an index spliced in place of its previous version is byte for byte the
// stanzas laid out one after the other, whatever was inserted, removed or changed, and
// it is laid out in the old array exactly when that is safe.
func TestSplice(t *testing.T) {
	stanza := func(tag string, i int) []byte {
		return fmt.Appendf(nil, "Package: p%s%d\nVersion: 1\nSHA256: %s%d\n", tag, i, tag, i)
	}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := rng.IntN(40)
		var file []byte
		for i := range n {
			file = append(append(file, stanza("o", i)...), '\n')
		}
		slack := rng.IntN(300)
		data := append(make([]byte, 0, len(file)+slack), file...)
		x := splitOldIndex(data, n)
		x.own, x.sum = seed%7 != 0, fmt.Sprint("sum", seed)
		// The new index: the old stanzas, some dropped, others inserted, some changed.
		var stanzas [][]byte
		var from []int
		for i := range n {
			for rng.IntN(6) == 0 {
				stanzas, from = append(stanzas, stanza("new", rng.IntN(1000))), append(from, -1)
			}
			switch rng.IntN(8) {
			case 0: // removed
			case 1: // changed (a phased update, say)
				stanzas, from = append(stanzas, append(bytes.Clone(x.stanzas[i]), "Phased-Update-Percentage: 10\n"...)), append(from, -1)
			default:
				stanzas, from = append(stanzas, x.stanzas[i]), append(from, i)
			}
		}
		if seed%11 == 0 && len(stanzas) > 2 && from[1] >= 0 { // one stanza twice: not in place
			stanzas, from = append(stanzas, x.stanzas[from[1]]), append(from, from[1])
		}
		var want []byte
		total := 0
		for _, st := range stanzas {
			want = append(append(want, st...), '\n')
			total += len(st) + 1
		}
		own, capacity, offs := x.own, cap(x.data), slices.Clone(x.offs)
		got, base, spliced := x.splice(stanzas, from)
		var joined []byte
		for _, st := range got {
			joined = append(append(joined, st...), '\n')
		}
		if !bytes.Equal(joined, want) {
			t.Fatalf("seed %d: spliced index\n%q\nwant\n%q", seed, joined, want)
		}
		inPlace := total <= capacity && contiguousIn(got, data[:total])
		if !own && !bytes.Equal(data, file) {
			t.Fatalf("seed %d: an array held elsewhere was changed", seed)
		}
		if own && total <= capacity && !inPlace && len(stanzas) > 0 && !repeated(from) && foreignBytes(stanzas, from) <= total/8 {
			t.Fatalf("seed %d: not laid out in place, though it could be", seed)
		}
		// base.Head: the old stanzas that stayed where they were, before the first that
		// did not; the file's bytes there are the new index's. base.Tail: the old stanzas
		// as far from the end as they were, after the last that was not.
		if !own || !inPlace || len(stanzas) == 0 {
			if spliced {
				t.Fatalf("seed %d: not in place, but spliced with %+v", seed, base)
			}
			continue
		}
		if !spliced || base.SHA256 != fmt.Sprint("sum", seed) {
			t.Fatalf("seed %d: spliced in place, but %+v, %v", seed, base, spliced)
		}
		same := base.Head
		lead, off := 0, 0
		for k := range stanzas {
			if from[k] < 0 || offs[from[k]] != off {
				break
			}
			lead, off = off+len(stanzas[k])+1, off+len(stanzas[k])+1
		}
		if same != lead || !bytes.Equal(want[:same], file[:same]) {
			t.Fatalf("seed %d: same = %d, want %d, the bytes the new index shares with the old at its start", seed, same, lead)
		}
		trail, end := 0, total
		for k := len(stanzas) - 1; k >= 0; k-- {
			end -= len(stanzas[k]) + 1
			if from[k] < 0 || len(file)-offs[from[k]] != total-end {
				break
			}
			trail = total - end
		}
		if base.Tail != trail || !bytes.Equal(want[total-trail:], file[len(file)-trail:]) {
			t.Fatalf("seed %d: tail = %d, want %d, the bytes the new index shares with the old at its end", seed, base.Tail, trail)
		}
	}
}

// contiguousIn reports whether stanzas lie one after the other in plain, each followed by
// one newline.
func contiguousIn(stanzas [][]byte, plain []byte) bool {
	off := 0
	for _, st := range stanzas {
		if off+len(st) >= len(plain) || len(st) == 0 || &plain[off] != &st[0] || plain[off+len(st)] != '\n' {
			return false
		}
		off += len(st) + 1
	}
	return off == len(plain)
}

func repeated(from []int) bool {
	last := -1
	for _, f := range from {
		if f >= 0 && f <= last {
			return true
		}
		last = max(last, f)
	}
	return false
}

func foreignBytes(stanzas [][]byte, from []int) int {
	n := 0
	for k, st := range stanzas {
		if from[k] < 0 {
			n += len(st)
		}
	}
	return n
}

// smallIndex returns n packages of one index and the index file that lists them.
func smallIndex(n int) ([]*manifest.Package, []byte) {
	var old []*manifest.Package
	var file []byte
	for i := range n {
		p := &manifest.Package{Suite: "s", Component: "main", Name: fmt.Sprintf("p%03d", i), Version: "1", Architecture: "amd64",
			Path: fmt.Sprintf("pool/main/p/p%03d.deb", i), SHA256: fmt.Sprintf("%064d", i)}
		old = append(old, p)
		file = fmt.Appendf(file, "Package: %s\nFilename: %s\nSHA256: %s\n\n", p.Name, p.Path, p.SHA256)
	}
	return old, file
}

// TestIndexStanzasSplicedInPlace: the stanzas of an index whose old copy hydrate made (with
// room to spare, as Gunzip leaves) and nothing else holds come back laid out in that
// copy's array, so that index.Build takes them without a copy; a copy another index
// shares is left as it was.
func TestIndexStanzasSplicedInPlace(t *testing.T) {
	const indexPath = "dists/s/main/binary-amd64/Packages"
	old, file := smallIndex(50)
	members := append(slices.Clone(old[:20]), old[21:]...) // one removed
	for _, shared := range []bool{false, true} {
		data := append(make([]byte, 0, len(file)+len(file)/64), file...)
		par := &parent{made: &madeIndexes{}}
		par.made.add(indexPath, data, shared)
		stanzas, err := indexStanzas(t.TempDir(), indexPath, members, old, &inputSet{}, par)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, st := range stanzas {
			want = append(append(want, st...), '\n')
		}
		if got := bytes.Count(want, []byte("Package: ")); got != len(members) {
			t.Fatalf("shared %v: %d stanzas, want %d", shared, got, len(members))
		}
		inPlace := contiguousIn(stanzas, data[:len(want)])
		if inPlace == shared {
			t.Errorf("shared %v: laid out in the old copy's array: %v", shared, inPlace)
		}
		if shared && !bytes.Equal(data, file) {
			t.Errorf("a shared copy was changed")
		}
	}
}

// TestIndexStanzasSplicedInKeptIndex: a warm build reads the parent's index itself,
// from the build cache or, published by an earlier armor, from the tree, with room to
// splice the new one in place, as for an index hydrate made.
func TestIndexStanzasSplicedInKeptIndex(t *testing.T) {
	for _, from := range []string{"cache", "tree"} {
		t.Run(from, func(t *testing.T) { testIndexStanzasSplicedInKeptIndex(t, from) })
	}
}

func testIndexStanzasSplicedInKeptIndex(t *testing.T, from string) {
	const indexPath = "dists/s/main/binary-amd64/Packages"
	tree := t.TempDir()
	old, file := smallIndex(50)
	d := dirs{tree: tree, cache: t.TempDir()}
	sums := digestsOf(file)
	switch from {
	case "cache":
		keepPlain(d.cache, sums.SHA256, file)
	case "tree":
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(indexPath)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, indexPath), file, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	par := &parent{made: &madeIndexes{}, plains: map[string]release.Digests{indexPath: sums}, dirs: d}
	x := par.loadIndex(indexPath)
	if !x.own || cap(x.data) <= len(file) || !bytes.Equal(x.data, file) {
		t.Fatalf("the index was read without room to splice into: own %v, %d bytes, capacity %d", x.own, len(x.data), cap(x.data))
	}
	// One package added, read in this build: the index grows.
	added := &manifest.Package{Suite: "s", Component: "main", Name: "p020a", Version: "1", Architecture: "amd64",
		Path: "pool/main/p/p020a.deb", SHA256: fmt.Sprintf("%064d", 999)}
	ins := &inputSet{fresh: map[string]*inputs.Input{added.SHA256: {Pkg: &deb.Package{
		Name: added.Name, Version: added.Version, Architecture: added.Architecture, SHA256: added.SHA256,
		Fields: []deb.Field{{Name: "Package", Value: added.Name}, {Name: "Version", Value: "1"}, {Name: "Architecture", Value: "amd64"}},
	}}}}
	members := slices.Concat(old[:21], []*manifest.Package{added}, old[21:])
	stanzas, err := indexStanzas(tree, indexPath, members, old, ins, par)
	if err != nil {
		t.Fatal(err)
	}
	if len(stanzas) != len(members) {
		t.Fatalf("%d stanzas, want %d", len(stanzas), len(members))
	}
	// Spliced, the stanzas lie one after the other from the start of the file's array.
	n := 0
	for _, st := range stanzas {
		n += len(st) + 1
	}
	if cap(stanzas[0]) < n || !contiguousIn(stanzas, stanzas[0][:n:n]) {
		t.Error("the new index was not spliced into the array of the tree's index")
	}
}

// TestLocate: a stanza is reused for a package only when it names the package's file
// (SHA256) at the package's path (Filename), whether the index lists exactly the
// parent's members in order (walked together) or not (looked up by SHA256).
func TestLocate(t *testing.T) {
	old, file := smallIndex(20)
	// Stanza 7 names another path for the same file: the package moved in the pool.
	moved := bytes.Replace(file, []byte("Filename: pool/main/p/p007.deb"), []byte("Filename: pool/contrib/p/p007.deb"), 1)
	for _, tc := range []struct {
		name    string
		file    []byte
		members []*manifest.Package
		walked  bool
	}{
		{"the members, in order", file, old, true},
		{"the members, one stanza at another path", moved, old, false},
		{"not the members", file, old[1:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := splitOldIndex(bytes.Clone(tc.file), 20)
			x.attach(tc.members)
			if walked := x.members != nil; walked != tc.walked {
				t.Fatalf("walked together: %v, want %v", walked, tc.walked)
			}
			for i, p := range old {
				want := i
				if i == 7 && !bytes.Equal(tc.file, file) {
					want = -1
				}
				if got := x.locate(p); got != want {
					t.Errorf("locate %s: %d, want %d", p.Name, got, want)
				}
			}
			other := *old[3]
			other.Path = "pool/contrib/p/p003.deb"
			x.next = 0
			if got := x.locate(&other); got != -1 {
				t.Errorf("locate a package at another path than its stanza's: %d, want -1", got)
			}
		})
	}
}
