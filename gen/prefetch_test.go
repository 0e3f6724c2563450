package gen

import (
	"testing"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// TestPrefetch: the indexes of the previous release are read ahead in writeIndexes's
// order until the budget is spent; take hands each out once, and the others are read by
// writeIndexes itself.
func TestPrefetch(t *testing.T) {
	tree := t.TempDir()
	amd64 := "dists/s/main/binary-amd64/Packages"
	arm64 := "dists/s/main/binary-arm64/Packages"
	files := map[string]string{
		amd64: "Package: a\nSHA256: 01\n\nPackage: b\nSHA256: 02\n\n",
		arm64: "Package: c\nSHA256: 03\n\n",
	}
	prev := &manifest.Manifest{}
	o := &Options{TreeDir: tree, CacheDir: t.TempDir(), Previous: prev, Suites: []Suite{{
		Codename: "s", Components: []string{"main"}, Architectures: []string{"amd64", "arm64"},
	}}}
	// The build cache keeps them, as the build that made them left them.
	plains := map[string]release.Digests{}
	for _, rel := range []string{amd64, arm64} {
		d := digestsOf([]byte(files[rel]))
		keepPlain(o, d.SHA256, []byte(files[rel]))
		plains[rel] = d
	}
	defer func(b int64) { prefetchBudget = b }(prefetchBudget)
	prefetchBudget = int64(len(files[amd64])) // room for the first index only
	pf := startPrefetch(o, prev, plains, nil)
	defer pf.stop()
	x := pf.take(amd64)
	if x == nil {
		t.Fatal("the first index was not prefetched")
	}
	if len(x.stanzas) != 2 || string(x.sums[0]) != "01" || string(x.sums[1]) != "02" {
		t.Errorf("prefetched %d stanzas with sums %q", len(x.stanzas), x.sums)
	}
	if pf.take(amd64) != nil {
		t.Error("an index was handed out twice")
	}
	if pf.take(arm64) != nil {
		t.Error("an index beyond the budget was prefetched")
	}
	// writeIndexes reads the rest itself, with the same result.
	par := &parent{old: pf, plains: plains, o: o}
	if x := readOldIndex(par, arm64, nil); len(x.stanzas) != 1 || string(x.sums[0]) != "03" {
		t.Errorf("read %d stanzas with sums %q", len(x.stanzas), x.sums)
	}

	// With Verify, nothing is reused, so nothing is read ahead.
	o.Verify = true
	prefetchBudget = 1 << 20
	pf = startPrefetch(o, prev, plains, nil)
	pf.stop()
	if len(pf.pending) != 0 {
		t.Errorf("prefetched %d indexes for a verifying build", len(pf.pending))
	}
	o.Verify = false
	pf = startPrefetch(o, prev, plains, nil)
	defer pf.stop()
	pf.drop(amd64)
	if pf.take(amd64) != nil {
		t.Error("a dropped index was handed out")
	}
	if pf.take(arm64) == nil {
		t.Error("the second index was not prefetched within the budget")
	}
}
