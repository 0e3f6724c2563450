package gen_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/manifest"
)

// writeSource makes a real source package hello_<version> (3.0 (quilt), upstream 1.0)
// with dpkg-source in dir, reusing an orig tarball already there, and returns the .dsc's
// path. note goes into debian/changelog.
func writeSource(t testing.TB, dir, version, note string) string {
	t.Helper()
	return writeSourceWith(t, dir, version, note, "hello, source\n")
}

// writeSourceWith is writeSource with the upstream README's content.
func writeSourceWith(t testing.TB, dir, version, note, readme string) string {
	t.Helper()
	tool(t, "dpkg-source")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "hello-1.0")
	os.RemoveAll(src)
	files := map[string]string{
		"README": readme,
		"debian/control": "Source: hello\nSection: devel\nPriority: optional\nMaintainer: Test <t@example.org>\n" +
			"Build-Depends: debhelper-compat (= 13)\nStandards-Version: 4.6.2\n\nPackage: hello\nArchitecture: any\nDescription: test\n test package\n",
		"debian/changelog":     "hello (" + version + ") unstable; urgency=medium\n\n  * " + note + "\n\n -- Test <t@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n",
		"debian/source/format": "3.0 (quilt)\n",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(src, name), []byte(content))
	}
	steps := [][]string{{"dpkg-source", "-b", "hello-1.0"}}
	if _, err := os.Stat(filepath.Join(dir, "hello_1.0.orig.tar.gz")); err != nil {
		steps = append([][]string{{"tar", "--exclude=debian", "--mtime=2024-01-01", "--sort=name", "--owner=0", "--group=0", "-czf", "hello_1.0.orig.tar.gz", "hello-1.0"}}, steps...)
	}
	for _, args := range steps {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	os.RemoveAll(src)
	return filepath.Join(dir, "hello_"+version+".dsc")
}

// sourcePackage returns the manifest's source package name=version, failing if absent.
func sourcePackage(t testing.TB, m *manifest.Manifest, name, version string) manifest.Package {
	t.Helper()
	i := slices.IndexFunc(m.Packages, func(p manifest.Package) bool {
		return p.Name == name && p.Version == version && p.Architecture == "source"
	})
	if i < 0 {
		t.Fatalf("the manifest lists no source package %s %s", name, version)
	}
	return m.Packages[i]
}

// TestSourcePackages: a .dsc among the inputs (matched with its tarballs by one broad
// pattern) is published with its files in the pool, byte for byte, and listed in
// main/source/Sources (plain, gz, xz, by-hash) that Release lists; the real apt-get
// fetches and unpacks it through deb-src. Adding a second version reads only it and
// rewrites only the Sources index; removing a version works; other bytes under a
// published identity are refused.
func TestSourcePackages(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].Inputs["main"] = []string{"in/**/*"}
	dsc := writeSource(t, r.in("src"), "1.0-1", "first")
	res := r.mustBuild()
	m := res.Manifest

	p := sourcePackage(t, m, "hello", "1.0-1")
	if p.Path != "pool/main/h/hello/hello_1.0-1.dsc" || len(p.Files) != 2 {
		t.Fatalf("source package: %+v", p)
	}
	for _, f := range append([]manifest.File{{Path: p.Path, SHA256: p.SHA256}}, p.Files...) {
		in, err := os.ReadFile(filepath.Join(filepath.Dir(dsc), filepath.Base(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.ReadFile(r.tree(f.Path))
		if err != nil {
			t.Fatalf("pool file: %v", err)
		}
		if string(in) != string(out) || sha256Hex(out) != f.SHA256 {
			t.Errorf("%s in the pool differs from the input or the manifest", f.Path)
		}
	}
	rel, err := os.ReadFile(r.tree("dists/stable/Release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"", ".gz", ".xz"} {
		if !strings.Contains(string(rel), " main/source/Sources"+v+"\n") {
			t.Errorf("Release does not list main/source/Sources%s", v)
		}
	}
	srcIdx := readIndex(t, r, "dists/stable/main/source/Sources")
	for _, v := range []string{".gz", ".xz"} {
		data, err := os.ReadFile(r.tree("dists/stable/main/source/Sources" + v))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.tree("dists/stable/main/source/by-hash/SHA256/" + sha256Hex(data))); err != nil {
			t.Errorf("no by-hash copy of Sources%s: %v", v, err)
		}
	}
	st := stanzas(t, srcIdx)
	if len(st) != 1 || st[0]["Package"] != "hello" || st[0]["Directory"] != "pool/main/h/hello" ||
		!strings.Contains(st[0]["Checksums-Sha256"], p.SHA256+" ") {
		t.Errorf("Sources:\n%s", srcIdx)
	}
	for _, b := range []string{"amd64", "arm64"} {
		for _, name := range packageNames(t, packagesFile(t, r, b)) {
			if name == "hello" {
				t.Errorf("binary-%s/Packages lists the source package", b)
			}
		}
	}
	if rep, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), gen.VerifyOptions{
		Suites: []string{"stable"}, Keyrings: [][]byte{publicKeyring(t, r.Opts.Key)}, Pool: true, Now: testDate,
	}); err != nil || rep.PoolFiles != 2+3 {
		t.Errorf("verify: %v (%d pool files checked, want the 2 debs and the 3 source files)", err, rep.PoolFiles)
	}

	// apt-get source through deb-src, over HTTP.
	srv := serveTree(t, r.Opts.TreeDir)
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	a := apttest.New(t, apttest.Options{Sources: []apttest.Source{
		{URI: srv.URL, Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: keyring, Types: "deb-src"},
	}})
	a.Update(t)
	work := t.TempDir()
	cmd := a.Cmd("source", "hello=1.0-1")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get source: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(work, "hello-1.0", "README")); err != nil || string(data) != "hello, source\n" {
		t.Errorf("apt-get source did not unpack the package: %v", err)
	}

	// A second version, beside the first: only it is read, only Sources is rewritten.
	writeSource(t, r.in("src"), "1.0-2", "second")
	before := snapshot(t, filepath.Join(r.Opts.TreeDir, "dists"))
	res = r.mustBuild()
	if res.Stats.Read != 1 || res.Stats.Added != 1 {
		t.Errorf("adding one .dsc: %+v, want 1 read and 1 added", res.Stats)
	}
	for _, d := range diffSnapshots(before, snapshot(t, filepath.Join(r.Opts.TreeDir, "dists"))) {
		if _, p, _ := strings.Cut(d, " "); !strings.HasPrefix(p, "stable/main/source/") && !strings.HasPrefix(p, "stable/InRelease") && !strings.HasPrefix(p, "stable/Release") {
			t.Errorf("adding a .dsc changed %s", d)
		}
	}
	two := sourcePackage(t, res.Manifest, "hello", "1.0-2")
	if !slices.Contains(two.Files, p.Files[0]) && !slices.Contains(two.Files, p.Files[1]) {
		t.Errorf("the two versions do not share their orig tarball: %v, %v", p.Files, two.Files)
	}
	a.Update(t)
	if out, _ := a.CacheCmd("showsrc", "hello").CombinedOutput(); !strings.Contains(string(out), "Version: 1.0-2") || !strings.Contains(string(out), "Version: 1.0-1") {
		t.Errorf("apt-cache showsrc after the second build:\n%s", out)
	}

	// A build that changes nothing reads nothing.
	if res = r.mustBuild(); !res.UpToDate || res.Stats.Read != 0 {
		t.Errorf("rebuild: up to date %v, %+v", res.UpToDate, res.Stats)
	}

	// Removing 1.0-1 (its file gone from the inputs) keeps 1.0-2 and the shared tarball.
	os.Remove(dsc)
	r.Opts.Remove = []gen.Removal{{Name: "hello", Version: "1.0-1", Architecture: "source"}}
	res = r.mustBuild()
	r.Opts.Remove = nil
	if slices.ContainsFunc(res.Manifest.Packages, func(q manifest.Package) bool { return q.Name == "hello" && q.Version == "1.0-1" }) {
		t.Errorf("hello 1.0-1 is still listed after its removal")
	}
	sourcePackage(t, res.Manifest, "hello", "1.0-2")
	if srcIdx := readIndex(t, r, "dists/stable/main/source/Sources"); len(stanzas(t, srcIdx)) != 1 {
		t.Errorf("Sources after the removal:\n%s", srcIdx)
	}

	// A new version whose orig tarball has the published name but other bytes is refused.
	other := writeSourceWith(t, r.in("src3"), "1.0-3", "third", "other upstream\n")
	if _, err := r.build(); !errors.Is(err, gen.ErrConflict) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "hello_1.0.orig.tar.gz") {
		t.Errorf("another orig tarball under the published name: %v, want ErrConflict naming %s and the tarball", err, other)
	}
	os.RemoveAll(r.in("src3"))

	// The same version again with other bytes is refused.
	writeSource(t, r.in("src"), "1.0-2", "changed")
	if _, err := r.build(); !errors.Is(err, gen.ErrConflict) {
		t.Errorf("a changed .dsc of a published version: %v, want ErrConflict", err)
	}
}

// TestSourcePartMismatch: a tarball that does not match its .dsc fails the build, naming
// the .dsc and the file.
func TestSourcePartMismatch(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 1})
	r.Opts.Suites[0].Inputs["main"] = []string{"in/**/*.deb", "in/**/*.dsc"}
	dsc := writeSource(t, r.in("src"), "1.0-1", "first")
	orig := filepath.Join(filepath.Dir(dsc), "hello_1.0.orig.tar.gz")
	writeFile(t, orig, []byte("not the tarball"))
	_, err := r.build()
	if err == nil || !strings.Contains(err.Error(), dsc) || !strings.Contains(err.Error(), "hello_1.0.orig.tar.gz") {
		t.Fatalf("build with a damaged tarball: %v", err)
	}
}

// TestFreshRunnerSources: a runner with only the parent's manifest, the store and one
// new .dsc publishes the parent's source and installer packages (stanzas from the
// fetched Sources and debian-installer indexes, no pool file fetched) plus the new one:
// the release the machine that built the parent makes from the same change.
func TestFreshRunnerSources(t *testing.T) {
	r := udebRepo(t)
	writeSource(t, r.in("src"), "1.0-1", "first")
	parent := r.mustBuild().Manifest
	st := storeOf(t, r.Opts.TreeDir, parent)

	newDir := filepath.Join(t.TempDir(), "new")
	copyFile(t, r.in("src/hello_1.0.orig.tar.gz"), filepath.Join(newDir, "hello_1.0.orig.tar.gz"))
	writeSource(t, newDir, "1.0-2", "second")
	for _, n := range []string{"hello_1.0-2.dsc", "hello_1.0-2.debian.tar.xz", "hello_1.0.orig.tar.gz"} {
		copyFile(t, filepath.Join(newDir, n), r.in("src2/"+n))
	}
	want := r.mustBuild()

	f := freshRunner(t, r)
	f.Last = parent
	for _, n := range []string{"hello_1.0-2.dsc", "hello_1.0-2.debian.tar.xz", "hello_1.0.orig.tar.gz"} {
		copyFile(t, filepath.Join(newDir, n), f.in("src2/"+n))
	}
	f.Opts.Fetch = st.fetch
	got := f.mustBuild()
	assertSameRelease(t, got.Manifest, want.Manifest)
	for _, p := range parent.Packages {
		for _, sum := range append([]string{p.SHA256}, func() (s []string) {
			for _, fl := range p.Files {
				s = append(s, fl.SHA256)
			}
			return s
		}()...) {
			if st.sums[sum] {
				t.Errorf("the runner fetched a pool file of %s %s", p.Name, p.Version)
			}
		}
	}
	if got.Stats.Read != 1 {
		t.Errorf("the runner read %d inputs, want the one .dsc", got.Stats.Read)
	}
}

// TestCopySource: `armor copy` lists a source package in another suite by reference, its
// inputs gone: the stanza comes from the parent's Sources index of the other suite, and
// the pool files stay where they are.
func TestCopySource(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites = append(r.Opts.Suites, gen.Suite{
		Codename: "testing", Components: []string{"main"}, Architectures: []string{"amd64", "arm64"},
		Inputs: map[string][]string{"main": {"testing/**/*"}},
	})
	writeSource(t, filepath.Join(r.Base, "testing"), "1.0-1", "first")
	first := r.mustBuild().Manifest
	if err := os.RemoveAll(filepath.Join(r.Base, "testing")); err != nil {
		t.Fatal(err)
	}
	r.Opts.Suites[1].AllowEmpty = true
	r.Opts.Copy = []gen.Copy{{Name: "hello", FromSuite: "testing", FromComp: "main", ToSuite: "stable", ToComponent: "main"}}
	res := r.mustBuild()
	if res.Stats.Copied != 1 {
		t.Fatalf("copied %d, want 1", res.Stats.Copied)
	}
	src := sourcePackage(t, first, "hello", "1.0-1")
	i := slices.IndexFunc(res.Manifest.Packages, func(p manifest.Package) bool { return p.Suite == "stable" && p.Architecture == "source" })
	if i < 0 || res.Manifest.Packages[i].Path != src.Path || !slices.Equal(res.Manifest.Packages[i].Files, src.Files) {
		t.Fatalf("stable's copy: %+v", res.Manifest.Packages)
	}
	data := readIndex(t, r, "dists/stable/main/source/Sources")
	if st := stanzas(t, data); len(st) != 1 || st[0]["Package"] != "hello" || st[0]["Directory"] != "pool/main/h/hello" {
		t.Errorf("stable's Sources:\n%s", data)
	}
}
