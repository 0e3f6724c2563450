package controld

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/armor-apt/armor/debian/deb"
	genindex "github.com/armor-apt/armor/gen/index"
)

// stanzas returns n Packages stanzas; the i-th is the same whatever n.
func stanzas(n int, tag string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "Package: p%06d\nVersion: 1%s\nArchitecture: amd64\nDescription: package number %d, padded to a realistic length with some words\n"+
			"Filename: pool/main/p/p%06d/p%06d_1_amd64.deb\nSize: %d\nSHA256: %064x\n", i, tag, i, i, i, 1000+i, i)
	}
	return out
}

// profileWhole reads a .gz form whole, as readForm does.
func profileWhole(t *testing.T, gz []byte) *profile {
	t.Helper()
	p := readWhole(gz, maxIndexPlain)
	if p == nil {
		t.Fatal("the form does not read whole")
	}
	return p
}

// incremental profiles data, a .gz form, against old, as readAgainst does as it streams.
func incremental(old *profile, data []byte, ix *index) *profile {
	sp := newSplice(old, int64(len(data)), ix)
	sp.write(data)
	return sp.finish()
}

// TestIncrementalMatchesWhole: reading a changed Packages.gz against the profile of the
// one before gives what reading it whole gives, for insertions, removals and changes
// anywhere, while it decompresses only a few members.
func TestIncrementalMatchesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := stanzas(6000, "")
	cache, err := genindex.OpenCache(t.TempDir()) // compress only the chunks that changed
	if err != nil {
		t.Fatal(err)
	}
	built, err := genindex.Build(base, cache, "test")
	if err != nil {
		t.Fatal(err)
	}
	old := profileWhole(t, built.Gzip)
	if len(old.members) < 10 {
		t.Fatalf("%d gzip members; the test needs an index of many", len(old.members))
	}
	for round := range 12 {
		next := append([][]byte(nil), base...)
		at := rng.IntN(len(next))
		switch round % 3 {
		case 0:
			next = append(next[:at], append([][]byte{[]byte("Package: new\nVersion: 2\nArchitecture: all\nFilename: pool/new.deb\nSize: 1\nSHA256: " + fmt.Sprintf("%064x", round) + "\n")}, next[at:]...)...)
		case 1:
			next = append(next[:at], next[at+1:]...)
		case 2:
			next[at] = stanzas(at+1, "-changed")[at]
		}
		b, err := genindex.Build(next, cache, "test")
		if err != nil {
			t.Fatal(err)
		}
		ix := &index{kind: deb.PackagesIndex, plain: b.Digests[0], plainOK: true}
		got := incremental(old, b.Gzip, ix)
		want := profileWhole(t, b.Gzip)
		if got == nil {
			t.Fatalf("round %d: read against the old profile failed", round)
		}
		if !reflect.DeepEqual(got.digests, want.digests) || !reflect.DeepEqual(got.members, want.members) {
			t.Fatalf("round %d: incremental profile differs from the whole one", round)
		}
		kept := 0
		for i, m := range got.members {
			j := len(old.members) - len(got.members) + i
			if (i < len(old.members) && m == old.members[i]) || (j >= 0 && m == old.members[j]) {
				kept++
			}
		}
		if kept < len(got.members)-4 {
			t.Errorf("round %d: only %d of %d members were taken from the old profile", round, kept, len(got.members))
		}
	}
}

// TestIncrementalRefusesMisalignedMembers: a .gz whose members cut stanzas is not read
// against a profile; and the profile of one has no members.
func TestIncrementalRefusesMisalignedMembers(t *testing.T) {
	text := bytes.Join(stanzas(50, ""), []byte("\n"))
	var gz bytes.Buffer
	for _, part := range [][]byte{text[:len(text)/2], text[len(text)/2:]} {
		w := gzip.NewWriter(&gz)
		w.Write(part)
		w.Close()
	}
	p := profileWhole(t, gz.Bytes())
	if p.members != nil || len(p.digests) != 50 {
		t.Fatalf("profile of a misaligned .gz: %d members, %d digests", len(p.members), len(p.digests))
	}
	aligned, err := genindex.Build(stanzas(50, ""), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	old := profileWhole(t, aligned.Gzip)
	if got := incremental(old, gz.Bytes(), &index{kind: deb.PackagesIndex}); got != nil {
		t.Errorf("read against a profile although its members cut stanzas")
	}
}

// TestDecodeGzipMemberBounds: the members decodeGzip reports lie exactly where they are.
func TestDecodeGzipMemberBounds(t *testing.T) {
	b, err := genindex.Build(stanzas(3000, ""), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	p := profileWhole(t, b.Gzip)
	off := 0
	for i, m := range p.members {
		r, err := gzip.NewReader(bytes.NewReader(b.Gzip[off : off+m.size]))
		if err != nil {
			t.Fatalf("member %d at %d: %v", i, off, err)
		}
		var plain bytes.Buffer
		if _, err := plain.ReadFrom(r); err != nil || int64(plain.Len()) != m.plain {
			t.Fatalf("member %d: %d plain bytes, %v; profile says %d", i, plain.Len(), err, m.plain)
		}
		off += m.size
	}
	if off != len(b.Gzip) {
		t.Errorf("members cover %d of %d bytes", off, len(b.Gzip))
	}
}

// readWhole profiles a .gz form whole, as readForm does, of at most limit bytes
// uncompressed, or returns nil when that fails.
func readWhole(gz []byte, limit int64) *profile {
	p := &profile{}
	var buf []byte
	r := deb.NewIndexReader(deb.PackagesIndex, func(e *deb.IndexEntry) error {
		var d entryDigest
		d, buf = digestOfEntry(buf, e)
		p.digests = append(p.digests, d)
		return nil
	})
	ms, aligned, err := decodeGzip(gz, &plainSink{r: r, limit: limit})
	if err != nil || r.Close() != nil {
		return nil
	}
	if aligned {
		p.members = ms
	}
	return p
}

// FuzzIncremental: whatever bytes a store or a signer hands over as the next form of an
// index, reading them against the profile of the form before either gives up or gives
// exactly what reading them whole gives: the same stanzas, the same members.
func FuzzIncremental(f *testing.F) {
	base := stanzas(1500, "")
	built, err := genindex.Build(base, nil, "test")
	if err != nil {
		f.Fatal(err)
	}
	old := readWhole(built.Gzip, 1<<24)
	if old == nil || len(old.members) < 3 {
		f.Fatalf("base index: %d members; the fuzz test needs several", len(old.members))
	}
	f.Add(built.Gzip)
	for _, next := range [][][]byte{
		append(slices.Clone(base[:10]), base[11:]...),
		append(append(slices.Clone(base[:700]), []byte("Package: new\nVersion: 1\nArchitecture: all\nFilename: pool/n.deb\nSize: 1\nSHA256: 00\n")), base[700:]...),
		append(slices.Clone(base[:1499]), stanzas(1500, "-changed")[1499]),
		base[:100],
	} {
		b, err := genindex.Build(next, nil, "test")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b.Gzip)
	}
	ix := &index{kind: deb.PackagesIndex}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := incremental(old, data, ix)
		if got == nil {
			return
		}
		want := readWhole(data, 1<<24)
		if want == nil || (want.members == nil && len(data) > 0) {
			t.Fatalf("read against the old profile, although reading it whole fails or is not aligned")
		}
		if !slices.Equal(got.digests, want.digests) || !slices.Equal(got.members, want.members) {
			t.Fatalf("read against the old profile: %d stanzas, %d members; whole: %d stanzas, %d members",
				len(got.digests), len(got.members), len(want.digests), len(want.members))
		}
	})
}
