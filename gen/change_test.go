package gen_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/manifest"
)

// objects is a content-addressed store in memory, filled from a tree: what push would
// have uploaded.
type objects struct {
	m       map[string][]byte
	fetched atomic.Int64
	mu      sync.Mutex
	sums    map[string]bool // fetched
}

func storeOf(t testing.TB, tree string, m *manifest.Manifest) *objects {
	return storeOfPaths(t, tree, m.Paths())
}

// distsStoreOf is storeOf of the release's dists/ files only: all a build may fetch.
func distsStoreOf(t testing.TB, tree string, m *manifest.Manifest) *objects {
	paths := map[string]manifest.Object{}
	for _, f := range m.Files {
		paths[f.Path] = manifest.Object{SHA256: f.SHA256, Size: f.Size}
	}
	return storeOfPaths(t, tree, paths)
}

func storeOfPaths(t testing.TB, tree string, paths map[string]manifest.Object) *objects {
	t.Helper()
	o := &objects{m: map[string][]byte{}}
	for p, obj := range paths {
		data, err := os.ReadFile(filepath.Join(tree, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		o.m[obj.SHA256] = data
	}
	return o
}

func (o *objects) fetch(_ context.Context, sum string, _ int64) ([]byte, error) {
	o.fetched.Add(1)
	o.mu.Lock()
	if o.sums == nil {
		o.sums = map[string]bool{}
	}
	o.sums[sum] = true
	o.mu.Unlock()
	if data, ok := o.m[sum]; ok {
		return data, nil
	}
	return nil, fmt.Errorf("object %s: not found", sum)
}

// freshRunner returns a repository like r's on a machine that has only the manifest: no
// inputs but those it adds, no tree, no cache.
func freshRunner(t *testing.T, r *repo) *repo {
	base := t.TempDir()
	f := &repo{t: t, Base: base, Opts: r.Opts, Last: r.Last}
	f.Opts.BaseDir = base
	f.Opts.TreeDir = filepath.Join(base, "tree")
	f.Opts.CacheDir = filepath.Join(base, "cache")
	if err := os.MkdirAll(filepath.Join(base, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFreshRunner: a runner that has only the parent's manifest, one new .deb and the
// store publishes the parent's packages plus the new one: the same release, byte for
// byte but for the signatures, as the machine that built the parent makes from the same
// change. It fetches the
// parent's dists/ files, never a pool file, and the tree holds only the new pool file.
func TestFreshRunner(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 6})
	parent := r.mustBuild().Manifest
	st := storeOf(t, r.Opts.TreeDir, parent)

	// The machine that built the parent adds one package.
	local := writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
	want := r.mustBuild()

	f := freshRunner(t, r)
	f.Last = parent
	copyFile(t, local, f.in("newpkg_1.0_amd64.deb"))
	f.Opts.Fetch = st.fetch
	got := f.mustBuild()
	// The same but for the signatures, which go-crypto salts.
	assertSameRelease(t, got.Manifest, want.Manifest)
	if s := got.Stats; s.Added != 1 || s.Removed != 0 || s.Packages != len(parent.Packages)+1 {
		t.Errorf("stats %+v: want 1 added, 0 removed, %d packages", s, len(parent.Packages)+1)
	}
	for _, p := range parent.Packages {
		if _, err := os.Stat(f.tree(p.Path)); err == nil {
			t.Errorf("the runner's tree holds the parent's pool file %s", p.Path)
		}
		if st.sums[p.SHA256] {
			t.Errorf("the runner fetched the pool file %s", p.Path)
		}
	}
	if n := st.fetched.Load(); n == 0 || n > int64(len(parent.Files)) {
		t.Errorf("%d objects fetched; want some, at most the parent's %d dists/ files", n, len(parent.Files))
	}
	if _, err := os.Stat(f.tree("pool/main/n/newpkg/newpkg_1.0_amd64.deb")); err != nil {
		t.Errorf("the new pool file is not in the runner's tree: %v", err)
	}
	for _, fl := range got.Manifest.Files {
		if _, err := os.Stat(f.tree(fl.Path)); err != nil {
			t.Errorf("the runner's tree lacks %s: %v", fl.Path, err)
		}
	}

	// Without the store, the runner cannot know the parent's stanzas: the build fails,
	// and writes nothing.
	g := freshRunner(t, r)
	g.Last = parent
	copyFile(t, local, g.in("newpkg_1.0_amd64.deb"))
	_, err := g.build()
	if err == nil || !strings.Contains(err.Error(), "no stanza for") {
		t.Errorf("fresh runner without a store: %v, want an error naming a package without its stanza", err)
	}
	if _, err := os.Stat(g.tree("dists/stable/InRelease")); err == nil {
		t.Error("the failed build left an InRelease")
	}

	// An object the store lacks is named, with the parent release.
	h := freshRunner(t, r)
	h.Last = parent
	copyFile(t, local, h.in("newpkg_1.0_amd64.deb"))
	lossy := &objects{m: map[string][]byte{}}
	for k, v := range st.m {
		lossy.m[k] = v
	}
	// The .gz the parent's stanzas come from.
	lost := parent.Files[slices.IndexFunc(parent.Files, func(f manifest.File) bool {
		return f.Path == "dists/stable/main/binary-amd64/Packages.gz"
	})]
	delete(lossy.m, lost.SHA256)
	h.Opts.Fetch = lossy.fetch
	_, err = h.build()
	if err == nil || !strings.Contains(err.Error(), parent.ID) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("store lacking %s: %v, want an error naming the parent release and the object", lost.Path, err)
	}
}

// TestParentKeepsPackages: a file gone from the inputs does not take its package out of
// the release; only an explicit removal does, and a removal of a package the parent does
// not list, or one whose file is still an input, is an error that changes nothing.
func TestParentKeepsPackages(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	first := r.mustBuild().Manifest
	const file = "real/libnatpmp-dev_20150609-7.1+b2_amd64.deb"

	r.Opts.Remove = []gen.Removal{{Name: "libnatpmp-dev"}}
	before := snapshot(t, r.Opts.TreeDir)
	if _, err := r.build(); err == nil || !strings.Contains(err.Error(), "still an input") || !strings.Contains(err.Error(), file) {
		t.Errorf("removing a package whose file is an input: %v, want an error naming the file", err)
	}
	if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) > 0 {
		t.Errorf("the refused removal changed the tree: %v", d)
	}

	if err := os.Remove(r.in(file)); err != nil {
		t.Fatal(err)
	}
	r.Opts.Remove = nil
	res := r.mustBuild()
	if !res.UpToDate || res.Manifest.ID != first.ID {
		t.Errorf("a file gone from the inputs changed the release (stats %+v)", res.Stats)
	}

	r.Opts.Remove = []gen.Removal{{Name: "nosuchpkg"}, {Name: "libnatpmp-dev"}}
	if _, err := r.build(); !errors.Is(err, gen.ErrNotFound) || !strings.Contains(err.Error(), "nosuchpkg") {
		t.Errorf("removing a package that is not there: %v, want ErrNotFound naming it", err)
	}
	r.Opts.Remove = []gen.Removal{{Name: "libnatpmp-dev", Version: "1.0"}}
	if _, err := r.build(); !errors.Is(err, gen.ErrNotFound) {
		t.Errorf("removing a version that is not there: %v, want ErrNotFound", err)
	}

	r.Opts.Remove = []gen.Removal{{Name: "libnatpmp-dev", Version: "20150609-7.1+b2", Architecture: "amd64"}}
	res = r.mustBuild()
	if res.Stats.Removed != 1 || res.Stats.Packages != len(first.Packages)-1 {
		t.Errorf("stats %+v: want 1 removed", res.Stats)
	}
	if names := packageNames(t, packagesFile(t, r, "amd64")); slices.Contains(names, "libnatpmp-dev") {
		t.Errorf("Packages still lists the removed package: %v", names)
	}
}

// TestSyncRemovals: a suite that mirrors its inputs loses the packages whose files are
// gone, but a build that would remove more than its share fails unless told.
func TestSyncRemovals(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 6})
	r.Opts.Suites[0].Sync = true
	first := r.mustBuild().Manifest
	for _, f := range []string{"real/libnatpmp-dev_20150609-7.1+b2_amd64.deb", "real/natpmpc_20150609-7.1+b2_amd64.deb"} {
		if err := os.Remove(r.in(f)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.build()
	if !errors.Is(err, gen.ErrTooManyRemovals) || !strings.Contains(err.Error(), "2 of its 10") || !strings.Contains(err.Error(), "natpmpc") {
		t.Fatalf("sync build removing 2 of 10: %v, want ErrTooManyRemovals naming them", err)
	}
	r.Opts.Suites[0].MaxRemovals = 0.25
	res := r.mustBuild()
	if res.Stats.Removed != 2 || len(res.Manifest.Packages) != len(first.Packages)-2 {
		t.Errorf("with max removals 25%%: stats %+v, want 2 removed", res.Stats)
	}

	// Every input gone: refused, then allowed.
	if err := os.RemoveAll(r.in("")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.in("synth"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Opts.Suites[0].AllowEmpty = true
	if _, err := r.build(); !errors.Is(err, gen.ErrTooManyRemovals) {
		t.Errorf("sync build removing everything: %v, want ErrTooManyRemovals", err)
	}
	r.Opts.AllowRemovals = true
	if res := r.mustBuild(); res.Stats.Packages != 0 {
		t.Errorf("with --allow-removals: %d packages left", res.Stats.Packages)
	}
}

// TestCopy: a package is promoted from testing to stable by reference, with its stanza
// and pool file as they are.
func TestCopy(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites = append(r.Opts.Suites, gen.Suite{
		Codename: "testing", Components: []string{"main"}, Architectures: []string{"amd64", "arm64"},
		Inputs: map[string][]string{"main": {"testing/*.deb"}},
	})
	writeOne(t, filepath.Join(r.Base, "testing"), "tool", "1.0", "amd64", "")
	writeOne(t, filepath.Join(r.Base, "testing"), "tool", "2.0", "amd64", "")
	r.mustBuild()
	if err := os.RemoveAll(filepath.Join(r.Base, "testing")); err != nil {
		t.Fatal(err)
	}
	r.Opts.Suites[1].AllowEmpty = true

	r.Opts.Copy = []gen.Copy{{Name: "tool", FromSuite: "testing", FromComp: "main", ToSuite: "stable", ToComponent: "main"}}
	res := r.mustBuild()
	if res.Stats.Copied != 1 {
		t.Errorf("copied %d, want 1 (the newest version)", res.Stats.Copied)
	}
	var inStable []manifest.Package
	for _, p := range res.Manifest.Packages {
		if p.Name == "tool" && p.Suite == "stable" {
			inStable = append(inStable, p)
		}
	}
	if len(inStable) != 1 || inStable[0].Version != "2.0" || inStable[0].Path != "pool/main/t/tool/tool_2.0_amd64.deb" {
		t.Fatalf("stable lists %+v, want tool 2.0 at its testing pool path", inStable)
	}
	testingSt := stanzaOf(t, readIndex(t, r, "dists/testing/main/binary-amd64/Packages"), "tool", "2.0")
	stableSt := stanzaOf(t, readIndex(t, r, "dists/stable/main/binary-amd64/Packages"), "tool", "2.0")
	if testingSt == "" || testingSt != stableSt {
		t.Errorf("stable's stanza %q differs from testing's %q", stableSt, testingSt)
	}
	// The copy's file list comes from testing's Contents file: its .deb is gone.
	if c := string(readIndex(t, r, "dists/stable/main/Contents-amd64")); !strings.Contains(c, "usr/share/doc/tool/README ") {
		t.Errorf("stable's Contents-amd64 does not list the copied tool's file:\n%s", c)
	}
	if res.Stats.FilesWritten > 16 {
		t.Errorf("the copy wrote %d files; want only stable's indexes, its Contents and Release files", res.Stats.FilesWritten)
	}

	r.Opts.Copy = []gen.Copy{{Name: "tool", Version: "3.0", FromSuite: "testing", FromComp: "main", ToSuite: "stable", ToComponent: "main"}}
	if _, err := r.build(); !errors.Is(err, gen.ErrNotFound) {
		t.Errorf("copy of a version that is not there: %v, want ErrNotFound", err)
	}
}

// TestKeepVersions: retention keeps the newest versions of each package, in Debian's
// version order (10.0 is newer than 9.0), and says how many it pruned.
func TestKeepVersions(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].KeepVersions = 2
	for _, v := range []string{"1:0.9", "9.0", "10.0"} {
		writeOne(t, r.in("tool"), "tool", v, "amd64", "")
	}
	writeOne(t, r.in("tool"), "tool", "1.0", "arm64", "")
	res := r.mustBuild()
	var got []string
	for _, p := range res.Manifest.Packages {
		if p.Name == "tool" {
			got = append(got, p.Version+"/"+p.Architecture)
		}
	}
	// 1:0.9 has an epoch: it is the newest.
	want := []string{"1.0/arm64", "10.0/amd64", "1:0.9/amd64"}
	if !slices.Equal(got, want) || res.Stats.Pruned != 1 {
		t.Errorf("kept %v (pruned %d), want %v (pruned 1)", got, res.Stats.Pruned, want)
	}
}

func readTree(t *testing.T, r *repo, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(r.tree(rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stanzaOf returns the stanza of a package and version in a Packages file, or "".
func stanzaOf(t *testing.T, data []byte, name, version string) string {
	for _, st := range strings.Split(string(data), "\n\n") {
		if strings.Contains(st, "Package: "+name+"\n") && strings.Contains(st, "\nVersion: "+version+"\n") {
			return st
		}
	}
	return ""
}

// TestUnrecordedParent: a release built on one that was built here and never recorded
// names that one's parent, since controld could never activate on it; once it is
// recorded, the next build names it.
func TestUnrecordedParent(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	first := r.mustBuild().Manifest
	if err := lineage.Recorded(r.Opts.CacheDir, first.ID); err != nil {
		t.Fatal(err)
	}
	writeOne(t, r.in("a"), "apkg", "1.0", "amd64", "")
	second := r.mustBuild().Manifest
	if second.Parent != first.ID {
		t.Fatalf("second release's parent %s, want the recorded first %s", second.Parent, first.ID)
	}
	writeOne(t, r.in("b"), "bpkg", "1.0", "amd64", "")
	third := r.mustBuild().Manifest
	if third.Parent != first.ID {
		t.Errorf("a release built on the unrecorded second names %s, want the first %s", third.Parent, first.ID)
	}
	if err := lineage.Recorded(r.Opts.CacheDir, third.ID); err != nil {
		t.Fatal(err)
	}
	writeOne(t, r.in("c"), "cpkg", "1.0", "amd64", "")
	if fourth := r.mustBuild().Manifest; fourth.Parent != third.ID {
		t.Errorf("a release built on the recorded third names %s, want %s", fourth.Parent, third.ID)
	}
}

// TestFailedCommitLeavesTree: a build that fails once files are moving into place (a
// rename refused), or whose manifest cannot be written after they are, leaves the tree
// exactly as the parent had it: no new index under the old InRelease.
func TestFailedCommitLeavesTree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(t *testing.T, r *repo)
	}{
		{"rename refused", func(t *testing.T, r *repo) {
			// Release cannot be replaced: a directory stands in its place.
			p := r.tree("dists/stable/Release")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(p, "obstacle"), []byte("x"))
		}},
		{"manifest not written", func(t *testing.T, r *repo) {
			// A directory stands where the manifest file goes: it is written beside it,
			// and cannot be renamed into place once the tree is.
			r.Opts.Manifest = filepath.Join(r.Base, "manifest.toml")
			writeFile(t, filepath.Join(r.Opts.Manifest, "obstacle"), []byte("x"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 4})
			parent := r.mustBuild().Manifest
			if err := lineage.Recorded(r.Opts.CacheDir, parent.ID); err != nil {
				t.Fatal(err)
			}
			tc.inject(t, r)
			writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
			before := snapshot(t, r.Opts.TreeDir)
			if _, err := r.build(); err == nil {
				t.Fatal("the build succeeded")
			}
			if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) > 0 {
				t.Errorf("the failed build changed the tree: %v", d)
			}
			// The next build, with the fault gone, builds on the parent as usual.
			r.Opts.Manifest = ""
			os.RemoveAll(r.tree("dists/stable/Release"))
			res := r.mustBuild()
			if res.Manifest.Parent != parent.ID || res.Stats.Added != 1 {
				t.Errorf("after the failure: parent %s, stats %+v; want parent %s, 1 added", res.Manifest.Parent, res.Stats, parent.ID)
			}
		})
	}
}

// TestSyncKeepVersions: in a suite that mirrors its inputs and keeps two versions, a new
// version prunes the oldest by retention, which is not a removal of sync's (the file is
// still there); armor add on a runner holding only the new file keeps the parent.
func TestSyncKeepVersions(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 4})
	r.Opts.Suites[0].Sync = true
	r.Opts.Suites[0].KeepVersions = 2
	for _, v := range []string{"1.0", "1.1"} {
		writeOne(t, r.in("tool"), "tool", v, "amd64", "")
	}
	r.mustBuild()
	writeOne(t, r.in("tool"), "tool", "1.2", "amd64", "")
	res := r.mustBuild()
	if got := versionsOf(res.Manifest, "tool"); !slices.Equal(got, []string{"1.1", "1.2"}) || res.Stats.Pruned != 1 {
		t.Fatalf("kept %v (pruned %d), want [1.1 1.2] (pruned 1)", got, res.Stats.Pruned)
	}
	before := len(res.Manifest.Packages)

	// A runner: the inputs hold only the new version; armor add publishes it.
	newDeb := writeOne(t, filepath.Join(t.TempDir(), "new"), "tool", "1.3", "amd64", "")
	if err := os.RemoveAll(r.in("")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.in(""), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Opts.Suites[0].AllowEmpty = true
	_, err := r.build()
	if !errors.Is(err, gen.ErrTooManyRemovals) || !strings.Contains(err.Error(), "armor add FILE... --suite stable") {
		t.Fatalf("a sync build with no inputs: %v, want ErrTooManyRemovals naming armor add", err)
	}
	r.Opts.SuggestFlags = " --from-active" // a build on the active release, as on a runner
	if _, err := r.build(); !strings.Contains(err.Error(), "armor add FILE... --suite stable --from-active`") ||
		!strings.Contains(err.Error(), "armor build --allow-removals --from-active`") {
		t.Fatalf("a sync build on the active release: %v, want its suggestions to carry --from-active", err)
	}
	r.Opts.SuggestFlags = ""
	r.Opts.Add = []gen.Addition{{Suite: "stable", Component: "main", Path: newDeb}}
	res = r.mustBuild()
	if got := versionsOf(res.Manifest, "tool"); !slices.Equal(got, []string{"1.2", "1.3"}) || len(res.Manifest.Packages) != before {
		t.Fatalf("armor add on a sync suite: tool %v and %d packages, want [1.2 1.3] and %d", got, len(res.Manifest.Packages), before)
	}
}

func versionsOf(m *manifest.Manifest, name string) []string {
	var out []string
	for _, p := range m.Packages {
		if p.Name == name {
			out = append(out, p.Version)
		}
	}
	return out
}

// TestSyncExplicitChange: on a runner that holds none of a sync suite's files, an
// explicit change (armor copy, phase, remove) is the parent plus it: the suite keeps its
// packages.
func TestSyncExplicitChange(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 4})
	r.Opts.Suites[0].Sync = true
	writeOne(t, r.in("tool"), "tool", "1.0", "amd64", "")
	first := r.mustBuild().Manifest
	if err := os.RemoveAll(r.in("")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.in(""), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Opts.Suites[0].AllowEmpty = true
	r.Opts.Remove = []gen.Removal{{Name: "tool"}}
	res := r.mustBuild()
	if len(res.Manifest.Packages) != len(first.Packages)-1 {
		t.Fatalf("armor remove on a runner without the sync suite's files: %d packages, want %d", len(res.Manifest.Packages), len(first.Packages)-1)
	}
}
