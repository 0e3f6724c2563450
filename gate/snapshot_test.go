package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// snapshotCase is a release checked both ways: a snapshot kept from an earlier release
// (kept), its parent and the release, each a subset of one pool of generated packages.
type snapshotCase struct {
	pool                  []Package
	kept, parent, release []int // indexes in pool
}

func newSnapshotCase(t testing.TB, seed uint64) *snapshotCase {
	r := rand.New(rand.NewPCG(seed, 11))
	var text strings.Builder
	for k := range 1 + r.IntN(4) {
		text.WriteString(genCase(r, fmt.Sprintf("c%d", k), r.IntN(6) == 0))
	}
	pool, err := ReadPackages([]byte(text.String()), "stable/main")
	if err != nil {
		t.Fatal(err)
	}
	for i := range pool {
		pool[i].SHA256 = fmt.Sprintf("%064x", i)
	}
	c := &snapshotCase{pool: pool}
	in := func(p float64) []int {
		var out []int
		for i := range pool {
			if r.Float64() < p {
				out = append(out, i)
			}
		}
		return out
	}
	c.kept, c.parent = in(0.7), in(0.7)
	// The release: the parent with a few removed and a few added.
	for i := range pool {
		had := slices.Contains(c.parent, i)
		if had && r.IntN(8) != 0 || !had && r.IntN(6) == 0 {
			c.release = append(c.release, i)
		}
	}
	return c
}

func (c *snapshotCase) list(idx []int) []Package {
	out := make([]Package, len(idx))
	for k, i := range idx {
		out[k] = c.pool[i]
	}
	return out
}

// change describes parent and release as the kept snapshot changed, as the build's
// hook does: a package of the snapshot that the parent lacks stays gone, and comes back
// as an extra if the release has it.
func (c *snapshotCase) change(t testing.TB, snap *Snapshot) *Change {
	ch := &Change{}
	keptAt := map[int]int{} // pool index → snapshot index
	for k, i := range c.kept {
		keptAt[i] = k
	}
	for k, i := range c.kept {
		if !slices.Contains(c.parent, i) {
			ch.ParentGone = append(ch.ParentGone, k)
		}
		if !slices.Contains(c.parent, i) || !slices.Contains(c.release, i) {
			ch.ReleaseGone = append(ch.ReleaseGone, k)
		}
	}
	get := func(i int) *Package {
		if k, ok := keptAt[i]; ok {
			p, err := snap.Package(k)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		p := c.pool[i]
		return &p
	}
	for _, i := range c.parent {
		_, kept := keptAt[i]
		if !kept {
			ch.ParentExtra = append(ch.ParentExtra, get(i))
		}
		if !slices.Contains(c.release, i) {
			ch.Removed = append(ch.Removed, get(i))
		}
	}
	for _, i := range c.release {
		_, kept := keptAt[i]
		switch {
		case !slices.Contains(c.parent, i):
			ch.Added = append(ch.Added, len(ch.ReleaseExtra))
			ch.ReleaseExtra = append(ch.ReleaseExtra, get(i))
		case !kept:
			ch.ReleaseExtra = append(ch.ReleaseExtra, get(i))
		}
	}
	return ch
}

// reportLines renders a report: each finding as its package, architecture and whether
// the parent had it, then the words of its explanation sorted (the order in which an
// explanation lists the packages of a name follows their ids, which differ between a
// snapshot changed and the release read afresh).
func reportLines(r *Report) []string {
	out := []string{fmt.Sprintf("checked %d", r.Checked)}
	for _, f := range r.Broken {
		words := strings.Fields(strings.Join(f.Reasons, " "))
		slices.Sort(words)
		out = append(out, fmt.Sprintf("%s on %s existing %v: %s", f.Package.ID(), f.Architecture, f.Existing, strings.Join(words, " ")))
	}
	for n, ids := range r.External {
		out = append(out, "external "+n+": "+strings.Join(ids, ", "))
	}
	slices.Sort(out[1:])
	return out
}

// TestSnapshotCheckMatchesCheck: a snapshot, changed, checks a release exactly as the
// release's packages do (every verdict and finding, and its explanation but for the
// order of the packages it lists), over generated
// repositories with alternatives, virtual packages, versions, conflicts, Multi-Arch and
// Essential packages, and changes that add, remove and replace packages.
func TestSnapshotCheckMatchesCheck(t *testing.T) {
	archs := []string{"amd64", "i386"}
	broken := 0
	for seed := range uint64(600) {
		c := newSnapshotCase(t, seed)
		kept := c.list(c.kept)
		ptrs := make([]*Package, len(kept))
		for i := range kept {
			ptrs[i] = &kept[i]
		}
		snap, err := DecodeSnapshot(EncodeSnapshot("test", "stable", archs, ptrs))
		if err != nil {
			t.Fatal(err)
		}
		ch := c.change(t, snap)
		release, parent := c.list(c.release), c.list(c.parent)
		want := mustCheck(t, &Suite{Codename: "stable", Architectures: archs, Release: release, Parent: parent})
		got, err := snap.Check(context.Background(), ch)
		if err != nil {
			t.Fatal(err)
		}
		if w, g := reportLines(want), reportLines(got); !slices.Equal(w, g) {
			t.Fatalf("seed %d: the snapshot's check says\n%s\nthe release's says\n%s", seed, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
		broken += len(want.Broken)
	}
	if broken < 100 {
		t.Fatalf("only %d findings over the cases: the cases test too little", broken)
	}
}

// TestSnapshotDamaged: a snapshot that is truncated, has a byte changed, or is of
// another encoding is refused, never read.
func TestSnapshotDamaged(t *testing.T) {
	pkgs := pkgsOf(t, synthRepo(200, 2))
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	good := EncodeSnapshot("v1", "stable", []string{"amd64"}, ptrs)
	if _, err := DecodeSnapshot(good); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		bad := slices.Clone(good)
		switch r.IntN(3) {
		case 0:
			bad = bad[:r.IntN(len(bad))]
		case 1:
			bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
		case 2:
			bad = append(bad, byte(r.IntN(256)))
		}
		if _, err := DecodeSnapshot(bad); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("a damaged snapshot gave %v", err)
		}
	}
	other := slices.Clone(good)
	copy(other, "armor gate universe 0\n")
	if _, err := DecodeSnapshot(other); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("a snapshot of another encoding gave %v", err)
	}
}

// resum sets a snapshot's checksum to match its content, so that the fuzzer reaches
// what lies behind the checksum.
func resum(data []byte) {
	if len(data) >= len(snapMagic)+4 {
		binary.LittleEndian.PutUint32(data[len(snapMagic):], crc32.Checksum(data[len(snapMagic)+4:], castagnoli))
	}
}

// FuzzDecodeSnapshot: whatever the bytes behind a valid checksum, decoding either fails
// with ErrSnapshot or gives a snapshot every part of which can be read and checked
// without a panic.
func FuzzDecodeSnapshot(f *testing.F) {
	pkgs := pkgsOf(f, genCase(rand.New(rand.NewPCG(1, 2)), "f", true))
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	f.Add(EncodeSnapshot("v", "stable", []string{"amd64", "i386"}, ptrs))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = slices.Clone(data)
		resum(data)
		snap, err := DecodeSnapshot(data)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error %v does not wrap ErrSnapshot", err)
			}
			return
		}
		var removed []*Package
		for k := range snap.Len() {
			if p, err := snap.Package(k); err == nil && k%2 == 0 {
				removed = append(removed, p)
			}
		}
		ch := &Change{ReleaseGone: []int{0}, Removed: removed}
		if snap.Len() == 0 {
			ch = &Change{}
		}
		if _, err := snap.Check(context.Background(), ch); err != nil && !errors.Is(err, ErrSnapshot) {
			t.Fatalf("check: %v", err)
		}
	})
}

// FuzzDecodeChange: a kept change, whatever its bytes behind a valid checksum, either
// fails with ErrSnapshot or gives packages and indexes that a check of the snapshot
// takes without a panic.
func FuzzDecodeChange(f *testing.F) {
	pkgs := pkgsOf(f, genCase(rand.New(rand.NewPCG(1, 2)), "f", true))
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	snap, err := DecodeSnapshot(EncodeSnapshot("v", "stable", []string{"amd64", "i386"}, ptrs))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(EncodeChange(snap.Sum(), "release", []int{0, 2}, ptrs[1:3]))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = slices.Clone(data)
		if len(data) >= len(changeMagic)+4 {
			binary.LittleEndian.PutUint32(data[len(changeMagic):], crc32.Checksum(data[len(changeMagic)+4:], castagnoli))
		}
		_, gone, extra, err := DecodeChange(data, snap)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error %v does not wrap ErrSnapshot", err)
			}
			return
		}
		ch := &Change{ParentGone: gone, ReleaseGone: gone, ParentExtra: extra, ReleaseExtra: extra}
		for i := range extra {
			ch.Added = append(ch.Added, i)
		}
		if _, err := snap.Check(context.Background(), ch); err != nil && !errors.Is(err, ErrSnapshot) {
			t.Fatalf("check: %v", err)
		}
	})
}
