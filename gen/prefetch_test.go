package gen

import (
	"context"
	"os"
	"testing"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/inputs"
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
	d := dirs{tree: tree, cache: t.TempDir()}
	suites := []Suite{{Codename: "s", Components: []string{"main"}, Architectures: []string{"amd64", "arm64"}}}
	// The build cache keeps them, as the build that made them left them.
	plains := map[string]release.Digests{}
	for _, rel := range []string{amd64, arm64} {
		sum := digestsOf([]byte(files[rel]))
		keepPlain(d.cache, sum.SHA256, []byte(files[rel]))
		plains[rel] = sum
	}
	defer func(b int64) { prefetchBudget = b }(prefetchBudget)
	prefetchBudget = int64(len(files[amd64])) // room for the first index only
	pf := startPrefetch(d, suites, prev, plains, nil)
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
	par := &parent{old: pf, plains: plains, dirs: d}
	if x := readOldIndex(par, arm64, nil); len(x.stanzas) != 1 || string(x.sums[0]) != "03" {
		t.Errorf("read %d stanzas with sums %q", len(x.stanzas), x.sums)
	}

	// With Verify, nothing is reused, so nothing is read ahead, stat cache or not.
	for _, verify := range []bool{true, false} {
		cache := inputs.StatCache{Entries: []inputs.Input{{Path: "/in/a.deb", SHA256: "01"}}}
		if err := os.WriteFile(statCachePath(d.cache), cache.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		ld := startLoading(context.Background(), d, parentSource{prev: prev}, suites, verify)
		<-ld.statCache
		if p, err := ld.parent(); err != nil || (p.old == nil) != verify {
			t.Errorf("verify %v: read ahead %v (%v)", verify, p.old != nil, err)
		}
		ld.close()
	}
	prefetchBudget = 1 << 20
	pf = startPrefetch(d, suites, prev, plains, nil)
	defer pf.stop()
	pf.drop(amd64)
	if pf.take(amd64) != nil {
		t.Error("a dropped index was handed out")
	}
	if pf.take(arm64) == nil {
		t.Error("the second index was not prefetched within the budget")
	}
}
