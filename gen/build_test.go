package gen_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

// withoutSignatures returns a copy of m without its id and without the InRelease and
// Release.gpg entries: those hold signatures, which differ on every signing (go-crypto
// salts each one), so two builds of the same inputs can only agree on the rest.
func withoutSignatures(m *manifest.Manifest) manifest.Manifest {
	c := *m
	c.ID = ""
	c.Files = nil
	for _, f := range m.Files {
		if !isSignature(f.Path) {
			c.Files = append(c.Files, f)
		}
	}
	return c
}

// assertSameRelease checks that two manifests describe the same release apart from the
// signatures, the id and the lineage: the parent, and the requested_date of a release
// dated a second after its parent, which a build from nothing at that date has not.
func assertSameRelease(t *testing.T, a, b *manifest.Manifest) {
	t.Helper()
	ca, cb := withoutSignatures(a), withoutSignatures(b)
	ca.Parent, cb.Parent = "", ""
	ca.RequestedDate, cb.RequestedDate = "", ""
	ea, err := manifest.Marshal(&ca)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := manifest.Marshal(&cb)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ea, eb) {
		t.Errorf("manifests differ beyond signatures:\n%s", lineDiff(string(ea), string(eb)))
	}
}

// assertSameTree checks that every path m lists has the same bytes in both trees, except
// the signature files, for which the signed text (InRelease's plaintext) must be equal.
func assertSameTree(t *testing.T, m *manifest.Manifest, treeA, treeB string, keyring []byte) {
	t.Helper()
	paths := m.Paths()
	if len(paths) == 0 {
		t.Fatal("manifest lists no paths")
	}
	for _, p := range sortedKeys(paths) {
		a, errA := os.ReadFile(filepath.Join(treeA, filepath.FromSlash(p)))
		b, errB := os.ReadFile(filepath.Join(treeB, filepath.FromSlash(p)))
		if errA != nil || errB != nil {
			t.Errorf("%s: %v / %v", p, errA, errB)
			continue
		}
		switch {
		case strings.HasSuffix(p, "/InRelease"):
			pa, _, errA := sign.VerifyClearsigned(a, keyring)
			pb, _, errB := sign.VerifyClearsigned(b, keyring)
			if errA != nil || errB != nil {
				t.Errorf("%s: verify: %v / %v", p, errA, errB)
			} else if !bytes.Equal(pa, pb) {
				t.Errorf("%s: signed text differs:\n%s", p, lineDiff(string(pa), string(pb)))
			}
		case strings.HasSuffix(p, "/Release.gpg"):
			// A detached signature: compared through Release, which it signs.
		case !bytes.Equal(a, b):
			t.Errorf("%s differs between the two trees", p)
		}
	}
}

// TestDeterministic builds the same inputs twice, into different directories, with the
// same date; the second build runs on one processor so that the order in which parallel
// reads finish differs. Every file but the signatures is byte-identical, InRelease signs
// the same text, and the manifests agree once the signature entries (and the id, a hash
// over them) are removed.
func TestDeterministic(t *testing.T) {
	a := newRepo(t, repoConfig{Real: true, Synth: 20})
	b := newRepo(t, repoConfig{Real: true, Synth: 20})
	ma := a.mustBuild().Manifest
	prev := runtime.GOMAXPROCS(1)
	mb := b.mustBuild().Manifest
	runtime.GOMAXPROCS(prev)

	assertSameRelease(t, ma, mb)
	assertSameTree(t, ma, a.Opts.TreeDir, b.Opts.TreeDir, publicKeyring(t, a.Opts.Key))
	sa, sb := snapshot(t, a.Opts.TreeDir), snapshot(t, b.Opts.TreeDir)
	if !slices.Equal(sortedKeys(sa), sortedKeys(sb)) {
		t.Errorf("the trees hold different paths:\n%v\n%v", sortedKeys(sa), sortedKeys(sb))
	}
}

// TestIncrementalEqualsFull checks that a release reached by incremental builds (reusing
// stanzas from the previous Packages files) is the release a full build of the same
// inputs gives.
func TestIncrementalEqualsFull(t *testing.T) {
	full := newRepo(t, repoConfig{Real: true, Synth: 6})
	inc := newRepo(t, repoConfig{Real: true, Synth: 6})

	// inc starts without two packages (one amd64, one all) and gains them one at a time.
	hold := t.TempDir()
	moved := []string{"synth/pkg000002_1.0-1_amd64.deb", "real/natpmp-utils_20150609-7.1_all.deb"}
	for _, rel := range moved {
		if err := os.Rename(inc.in(rel), filepath.Join(hold, filepath.Base(rel))); err != nil {
			t.Fatal(err)
		}
	}
	inc.mustBuild()
	for _, rel := range moved {
		if err := os.Rename(filepath.Join(hold, filepath.Base(rel)), inc.in(rel)); err != nil {
			t.Fatal(err)
		}
		if res := inc.mustBuild(); res.Stats.Read != 1 {
			t.Errorf("adding %s: read %d files, want 1", rel, res.Stats.Read)
		}
	}
	mFull := full.buildAsOf(inc.Last)
	assertSameRelease(t, mFull, inc.Last)
	assertSameTree(t, mFull, full.Opts.TreeDir, inc.Opts.TreeDir, publicKeyring(t, full.Opts.Key))
}

// changedPaths builds and returns the tree paths the build added, changed, removed or
// touched.
func changedPaths(t *testing.T, r *repo) (*gen.Result, []string) {
	t.Helper()
	before := snapshot(t, r.Opts.TreeDir)
	// Make any rewrite visible in mtimes even on file systems with coarse timestamps.
	time.Sleep(10 * time.Millisecond)
	res := r.mustBuild()
	return res, diffSnapshots(before, snapshot(t, r.Opts.TreeDir))
}

// assertOnlyUnder fails if a changed path is not under one of the allowed prefixes.
func assertOnlyUnder(t *testing.T, changed []string, allowed ...string) {
	t.Helper()
	for _, c := range changed {
		_, p, _ := strings.Cut(c, " ")
		ok := false
		for _, a := range allowed {
			if strings.HasPrefix(p, a) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: not expected to change (allowed: %v)", c, allowed)
		}
	}
}

func assertChanged(t *testing.T, changed []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(changed, func(c string) bool { return strings.HasSuffix(c, " "+w) }) {
			t.Errorf("%s was not rewritten; changes: %v", w, changed)
		}
	}
}

const (
	amd64Dir = "dists/stable/main/binary-amd64/"
	arm64Dir = "dists/stable/main/binary-arm64/"
)

// contentsByHash is the by-hash directory of the Contents files of stable/main.
const contentsByHash = "dists/stable/main/by-hash/"

func contentsOf(arch string) string { return "dists/stable/main/Contents-" + arch }

var signedFiles = []string{"dists/stable/Release", "dists/stable/InRelease", "dists/stable/Release.gpg"}

func TestNoChangeIsUpToDate(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	first := r.mustBuild()
	res, changed := changedPaths(t, r)
	if !res.UpToDate {
		t.Error("a rebuild without change is not up to date")
	}
	if res.Manifest != first.Manifest {
		t.Error("an up-to-date build does not return the previous manifest")
	}
	want := gen.Stats{Inputs: 8, Packages: 8}
	if res.Stats != want {
		t.Errorf("stats %+v, want %+v", res.Stats, want)
	}
	if len(changed) != 0 {
		t.Errorf("an up-to-date build changed the tree: %v", changed)
	}
}

func TestAddOne(t *testing.T) {
	for _, tc := range []struct {
		name, arch string
		indexes    int
		rewritten  []string // index directories rewritten
		untouched  string   // an index directory that must not change ("" for none)
	}{
		{name: "amd64", arch: "amd64", indexes: 1, rewritten: []string{amd64Dir, contentsOf("amd64"), contentsByHash}, untouched: contentsOf("arm64")},
		{name: "all", arch: "all", indexes: 2, rewritten: []string{amd64Dir, arm64Dir, contentsOf("amd64"), contentsOf("arm64"), contentsByHash}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 4})
			r.mustBuild()
			writeOne(t, r.in("new"), "newpkg", "2:1.5-1", tc.arch, "pkg000000")
			res, changed := changedPaths(t, r)
			s := res.Stats
			if s.Read != 1 || s.Added != 1 || s.Removed != 0 || s.Packages != 9 || s.Inputs != 9 || s.IndexesWritten != tc.indexes || s.ContentsWritten != tc.indexes || s.SuitesSigned != 1 {
				t.Errorf("stats %+v: want Read 1, Added 1, Removed 0, Packages 9, Inputs 9, IndexesWritten and ContentsWritten %d, SuitesSigned 1", s, tc.indexes)
			}
			pool := "pool/main/n/newpkg/newpkg_1.5-1_" + tc.arch + ".deb"
			allowed := append([]string{pool}, signedFiles...)
			assertOnlyUnder(t, changed, append(allowed, tc.rewritten...)...)
			assertChanged(t, changed, allowed...)
			for _, dir := range tc.rewritten {
				if arch, ok := strings.CutPrefix(dir, contentsOf("")); ok {
					assertChanged(t, changed, dir+".gz")
					if c := string(readIndex(t, r, dir)); !strings.Contains(c, "usr/share/doc/newpkg/README") {
						t.Errorf("Contents-%s does not list newpkg's file:\n%s", arch, c)
					}
					continue
				}
				if dir == contentsByHash {
					continue
				}
				assertChanged(t, changed, dir+"Packages.gz", dir+"Packages.xz")
				arch := strings.TrimPrefix(strings.TrimSuffix(dir, "/"), "dists/stable/main/binary-")
				if names := packageNames(t, packagesFile(t, r, arch)); !slices.Contains(names, "newpkg") {
					t.Errorf("%sPackages does not list newpkg: %v", dir, names)
				}
			}
			if tc.untouched != "" && slices.ContainsFunc(changed, func(c string) bool { return strings.Contains(c, tc.untouched) }) {
				t.Errorf("%s changed: %v", tc.untouched, changed)
			}
			if !slices.ContainsFunc(res.Manifest.Packages, func(p manifest.Package) bool {
				return p.Name == "newpkg" && p.Version == "2:1.5-1" && p.Path == pool
			}) {
				t.Errorf("manifest does not list newpkg 2:1.5-1 at %s", pool)
			}
		})
	}
}

// TestRemoveOne: in a suite that mirrors its inputs, a file gone is a package removed.
func TestRemoveOne(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.Opts.Suites[0].Sync = true
	r.Opts.Suites[0].MaxRemovals = 0.5
	r.mustBuild()
	const gone = "pool/main/libn/libnatpmp/libnatpmp-dev_20150609-7.1+b2_amd64.deb"
	if err := os.Remove(r.in("real/libnatpmp-dev_20150609-7.1+b2_amd64.deb")); err != nil {
		t.Fatal(err)
	}
	res, changed := changedPaths(t, r)
	s := res.Stats
	if s.Read != 0 || s.Removed != 1 || s.Added != 0 || s.Packages != 7 || s.IndexesWritten != 1 {
		t.Errorf("stats %+v: want Read 0, Removed 1, Added 0, Packages 7, IndexesWritten 1", s)
	}
	assertOnlyUnder(t, changed, append([]string{amd64Dir, contentsOf("amd64"), contentsByHash}, signedFiles...)...)
	if c := string(readIndex(t, r, contentsOf("amd64"))); strings.Contains(c, "libnatpmp-dev") || !strings.Contains(c, "libnatpmp1") {
		t.Errorf("Contents-amd64 still lists the removed package, or lost another:\n%s", c)
	}
	if names := packageNames(t, packagesFile(t, r, "amd64")); slices.Contains(names, "libnatpmp-dev") {
		t.Errorf("Packages still lists the removed package: %v", names)
	}
	if _, ok := res.Manifest.Paths()[gone]; ok {
		t.Errorf("manifest still lists %s", gone)
	}
	// A static mirror keeps the previous release's files for one more generation, for
	// clients holding the previous InRelease; the next build that changes something
	// deletes them.
	if _, err := os.Stat(r.tree(gone)); err != nil {
		t.Errorf("the previous release's pool file was deleted at once: %v", err)
	}
	writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
	r.mustBuild()
	if _, err := os.Stat(r.tree(gone)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s survives two releases after its removal (stat: %v)", gone, err)
	}
}

// TestTouchedInput: a new mtime makes the build read the file again, but the same content
// gives the same release, and the next build trusts the new mtime.
func TestTouchedInput(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	first := r.mustBuild().Manifest
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(r.in("real/natpmpc_20150609-7.1+b2_amd64.deb"), later, later); err != nil {
		t.Fatal(err)
	}
	res, changed := changedPaths(t, r)
	if res.Stats.Read != 1 || !res.UpToDate || res.Manifest != first {
		t.Errorf("touched input: read %d, up to date %v, same manifest %v; want 1, true, true", res.Stats.Read, res.UpToDate, res.Manifest == first)
	}
	if len(changed) != 0 {
		t.Errorf("touching an input changed the tree: %v", changed)
	}
	if res := r.mustBuild(); res.Stats.Read != 0 || !res.UpToDate {
		t.Errorf("next build: read %d, up to date %v; want 0, true", res.Stats.Read, res.UpToDate)
	}
}

// TestVerifyRereadsAll: Options.Verify reads every input even when size and mtime match,
// so it sees content changed behind an unchanged mtime (which a normal build trusts), and
// it repairs a damaged pool file in the tree.
func TestVerifyRereadsAll(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.mustBuild()

	// Change the last byte of a synthetic package (inside its stored data.tar.gz) and put
	// the mtime back: same path, size and mtime, different content.
	in := r.in("synth/pkg000002_1.0-1_amd64.deb")
	st, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	writeFile(t, in, data)
	if err := os.Chtimes(in, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	// Damage a pool file in the tree without changing its size.
	const poolFile = "pool/main/libn/libnatpmp/natpmpc_20150609-7.1+b2_amd64.deb"
	damaged, err := os.ReadFile(r.tree(poolFile))
	if err != nil {
		t.Fatal(err)
	}
	damaged[100] ^= 0xff
	writeFile(t, r.tree(poolFile), damaged)

	if res := r.mustBuild(); res.Stats.Read != 0 || !res.UpToDate {
		t.Fatalf("without Verify: read %d, up to date %v; want 0, true (size and mtime are trusted)", res.Stats.Read, res.UpToDate)
	}
	r.Opts.Verify = true
	// Verify rereads every input and so sees the changed contents; a published version may
	// not change its bytes (clients holding the previous index would get a hash sum
	// mismatch), so the build refuses, naming the file.
	if _, err := r.build(); !errors.Is(err, gen.ErrConflict) || !strings.Contains(err.Error(), in) {
		t.Fatalf("with Verify, a changed published package: err %v; want ErrConflict naming %s", err, in)
	}
	data[len(data)-1] ^= 0xff // put the published contents back
	writeFile(t, in, data)
	res := r.mustBuild()
	if res.Stats.Read != 8 {
		t.Errorf("with Verify: read %d inputs, want all 8", res.Stats.Read)
	}
	if got, err := os.ReadFile(r.tree(poolFile)); err != nil || bytes.Equal(got, damaged) {
		t.Errorf("Verify did not repair the damaged pool file %s (err %v)", poolFile, err)
	}
	if _, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), gen.VerifyOptions{
		Suites: []string{"stable"}, Keyrings: [][]byte{publicKeyring(t, r.Opts.Key)}, Pool: true, Now: testDate,
	}); err != nil {
		t.Errorf("tree after a Verify build: %v", err)
	}
}

// encodeDeb writes a .deb with the given control file.
func encodeDeb(t *testing.T, path, control string) {
	t.Helper()
	var b bytes.Buffer
	if err := synth.Encode(&b, synth.Deb{Control: []byte(control)}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b.Bytes())
}

const controlTail = "Maintainer: Armor Test <t@example.invalid>\nDescription: a test package\n"

// TestBadInput adds one bad input to a built repository. Each build must fail with an
// error naming the file (and the field, where one is at fault), and leave the tree exactly
// as it was; once the bad input is gone, the next build finds everything up to date
// without reading a file, so neither the tree nor the build cache was disturbed.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, r *repo) (bad []string) // returns the paths the error must name
		is    error                                      // errors.Is target, or nil
		field string                                     // a deb.FieldError's field, or ""
		want  []string                                   // further substrings of the message
	}{
		{
			name: "truncated",
			setup: func(t *testing.T, r *repo) []string {
				data, err := os.ReadFile(filepath.Join(debsDir, realDebs[0]))
				if err != nil {
					t.Fatal(err)
				}
				p := r.in("bad/truncated.deb")
				writeFile(t, p, data[:len(data)-100])
				return []string{p}
			},
			is: deb.ErrTruncated,
		},
		{
			name: "not a deb",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/text.deb")
				writeFile(t, p, []byte("this is not an ar archive\n"))
				return []string{p}
			},
			is: deb.ErrNotDeb,
		},
		{
			name: "missing Package",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/nopkg.deb")
				encodeDeb(t, p, "Version: 1.0\nArchitecture: amd64\n"+controlTail)
				return []string{p}
			},
			is: deb.ErrMissingField, field: "Package",
		},
		{
			name: "missing Version",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/nover.deb")
				encodeDeb(t, p, "Package: nover\nArchitecture: amd64\n"+controlTail)
				return []string{p}
			},
			is: deb.ErrMissingField, field: "Version",
		},
		{
			name: "missing Architecture",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/noarch.deb")
				encodeDeb(t, p, "Package: noarch\nVersion: 1.0\n"+controlTail)
				return []string{p}
			},
			is: deb.ErrMissingField, field: "Architecture",
		},
		{
			name: "invalid version",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/badver.deb")
				encodeDeb(t, p, "Package: badver\nVersion: 1.0 beta\nArchitecture: amd64\n"+controlTail)
				return []string{p}
			},
			field: "Version", want: []string{"1.0 beta"},
		},
		{
			name: "architecture not in the suite",
			setup: func(t *testing.T, r *repo) []string {
				p := writeOne(t, r.in("bad"), "otherarch", "1.0", "i386", "")
				return []string{p}
			},
			want: []string{"field Architecture", `"i386"`, "amd64, arm64"},
		},
		{
			name: "two different files with one identity",
			setup: func(t *testing.T, r *repo) []string {
				// Same name, version and architecture as in/synth's pkg000000, other content.
				p := writeOne(t, r.in("bad"), "pkg000000", "1.0-1", "amd64", "natpmpc")
				return []string{p, r.in("synth/pkg000000_1.0-1_amd64.deb")}
			},
			is: gen.ErrConflict, want: []string{"pkg000000 1.0-1 (amd64)"},
		},
		{
			// Debian pool file names leave the epoch out: 1.0-1 and 1:1.0-1 would share one.
			name: "two versions that differ only in their epoch",
			setup: func(t *testing.T, r *repo) []string {
				a := writeOne(t, r.in("bad/a"), "epochy", "1.0-1", "amd64", "")
				b := writeOne(t, r.in("bad/b"), "epochy", "1:1.0-1", "amd64", "")
				return []string{a, b}
			},
			is: gen.ErrConflict, want: []string{"would both be published as", "pool/main/e/epochy/epochy_1.0-1_amd64.deb"},
		},
		{
			name: "dangling symlink",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/dangling.deb")
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(r.Base, "nowhere.deb"), p); err != nil {
					t.Fatal(err)
				}
				return []string{p}
			},
			is: os.ErrNotExist,
		},
		{
			// A pattern matching a directory named like a package is a mistake to report,
			// not a file to skip silently.
			name: "directory named x.deb",
			setup: func(t *testing.T, r *repo) []string {
				p := r.in("bad/x.deb")
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				return []string{p}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 2})
			r.mustBuild()
			before := snapshot(t, r.Opts.TreeDir)
			bad := tc.setup(t, r)
			res, err := r.build()
			if err == nil {
				t.Fatalf("build succeeded (%d packages), want an error naming %v", res.Stats.Packages, bad)
			}
			if res != nil {
				t.Error("a failed build returned a result")
			}
			msg := err.Error()
			for _, s := range append(bad, tc.want...) {
				if !strings.Contains(msg, s) {
					t.Errorf("error does not name %q:\n%s", s, msg)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error is not %v: %v", tc.is, err)
			}
			if tc.field != "" {
				var fe *deb.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Errorf("error is not a FieldError for %s: %#v", tc.field, err)
				} else if !strings.Contains(msg, "field "+tc.field) {
					t.Errorf("error does not say \"field %s\": %s", tc.field, msg)
				}
			}
			if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) != 0 {
				t.Errorf("a failed build changed the tree: %v", d)
			}
			if err := os.RemoveAll(r.in("bad")); err != nil {
				t.Fatal(err)
			}
			if res, err := r.build(); err != nil || !res.UpToDate || res.Stats.Read != 0 {
				t.Errorf("after removing the bad input: err %v, result %+v; want up to date, nothing read", err, res)
			}
		})
	}
}

// TestDuplicateFilesAreOne: the same .deb under two paths is one package, not a conflict.
func TestDuplicateFilesAreOne(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 2})
	dup := copyFile(t, filepath.Join(debsDir, realDebs[1]), r.in("copies/"+realDebs[1]))
	res := r.mustBuild()
	if res.Stats.Packages != 6 || res.Stats.Inputs != 7 {
		t.Errorf("stats %+v: want 6 packages from 7 inputs", res.Stats)
	}
	want := []string{"libnatpmp-dev", "libnatpmp1", "natpmp-utils", "natpmpc", "pkg000000", "pkg000001"}
	if names := packageNames(t, packagesFile(t, r, "amd64")); !slices.Equal(names, want) {
		t.Errorf("amd64 Packages lists %v, want each of %v once", names, want)
	}
	// Removing one copy changes nothing.
	if err := os.Remove(dup); err != nil {
		t.Fatal(err)
	}
	if res := r.mustBuild(); !res.UpToDate {
		t.Errorf("removing a duplicate copy changed the release: %+v", res.Stats)
	}
}

// TestKeyErrors covers what a build does without a usable key. The CLI reads the key
// (sign.ReadSecretKey) before calling Build: a wrong or missing passphrase stops it there,
// with errors it can tell apart; Build itself refuses to run without a key and writes
// nothing.
func TestKeyErrors(t *testing.T) {
	protected, err := os.ReadFile(filepath.Join(keysDir, "protected.sec.asc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pass string
		want       error
	}{
		{"wrong passphrase", "not-the-passphrase", sign.ErrWrongPassphrase},
		{"no passphrase", "", sign.ErrPassphraseRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sign.ReadSecretKey(bytes.NewReader(protected), []byte(tc.pass)); !errors.Is(err, tc.want) {
				t.Errorf("read protected key: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("no key", func(t *testing.T) {
		r := newRepo(t, repoConfig{Real: true})
		r.mustBuild()
		before := snapshot(t, r.Opts.TreeDir)
		writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
		r.Opts.Key = nil
		if _, err := r.build(); err == nil || !strings.Contains(err.Error(), "key") {
			t.Errorf("build without a key: %v, want an error about the key", err)
		}
		if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) != 0 {
			t.Errorf("a build without a key changed the tree: %v", d)
		}
	})
}

// TestReplacedInputSameSize: an input replaced by different content of the same size (a
// rebuilt package keeping its name, version and architecture) must not leave the tree
// serving the old pool file under the new sums, which apt reports as a hash sum mismatch.
// The build may refuse the replacement or publish it; either way the tree must verify.
func TestReplacedInputSameSize(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.mustBuild()
	in := r.in("synth/pkg000002_1.0-1_amd64.deb")
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff // inside the stored data.tar.gz: still a readable .deb
	writeFile(t, in, data)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(in, later, later); err != nil {
		t.Fatal(err)
	}
	res, err := r.build()
	if err != nil {
		if !strings.Contains(err.Error(), in) {
			t.Errorf("refused the replacement without naming the file: %v", err)
		}
		return
	}
	if res.Stats.Read != 1 {
		t.Errorf("read %d files, want 1", res.Stats.Read)
	}
	rep, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), gen.VerifyOptions{
		Suites: []string{"stable"}, Keyrings: [][]byte{publicKeyring(t, r.Opts.Key)}, Pool: true, Now: testDate,
	})
	if err != nil {
		t.Errorf("the tree does not verify after the replacement: %v\nproblems: %q", err, rep.Problems)
	}
}

// TestResign: with Resign, an unchanged repository is signed again with the new date
// (refreshing Date and Valid-Until) and no index is rewritten; without it, a new date
// alone changes nothing.
func TestResign(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true})
	r.Opts.Suites[0].ValidFor = 7 * 24 * time.Hour
	r.mustBuild()
	r.Opts.Date = testDate.Add(24 * time.Hour)
	if res := r.mustBuild(); !res.UpToDate {
		t.Errorf("a new date alone rebuilt the repository: %+v", res.Stats)
	}
	r.Opts.Resign = true
	res, changed := changedPaths(t, r)
	if res.UpToDate || res.Stats.SuitesSigned != 1 || res.Stats.IndexesWritten != 0 {
		t.Errorf("resign: up to date %v, stats %+v; want signed 1, indexes 0", res.UpToDate, res.Stats)
	}
	assertOnlyUnder(t, changed, signedFiles...)
	release, err := os.ReadFile(r.tree("dists/stable/Release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nDate: Mon, 02 Mar 2026 12:00:00 UTC\n", "\nValid-Until: Mon, 09 Mar 2026 12:00:00 UTC\n"} {
		if !bytes.Contains(release, []byte(want)) {
			t.Errorf("re-signed Release lacks %q:\n%s", want, release)
		}
	}
	if res.Manifest.Date != "2026-03-02T12:00:00Z" {
		t.Errorf("manifest date %s, want the new date", res.Manifest.Date)
	}
}

// TestUnsafeNames: suite, component and architecture names become tree paths, so a name
// that could lead out of dists/ or pool/ is refused before anything is written.
func TestUnsafeNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s *gen.Suite)
	}{
		{"codename ..", func(s *gen.Suite) { s.Codename = ".." }},
		{"codename with ../", func(s *gen.Suite) { s.Codename = "../../outside" }},
		{"absolute codename", func(s *gen.Suite) { s.Codename = "/tmp/outside" }},
		{"component with ../", func(s *gen.Suite) {
			s.Components = []string{"main/../../../outside"}
			s.Inputs = map[string][]string{"main/../../../outside": {"in/**/*.deb"}}
		}},
		{"architecture ..", func(s *gen.Suite) { s.Architectures = []string{"amd64", ".."} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Synth: 2})
			tc.edit(&r.Opts.Suites[0])
			if _, err := r.build(); err == nil || !strings.Contains(err.Error(), "not a safe name") {
				t.Errorf("build: %v, want an error about an unsafe name", err)
			}
			ents, err := os.ReadDir(r.Base)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() != "in" && e.Name() != "cache" {
					t.Errorf("the refused build left %s in %s", e.Name(), r.Base)
				}
			}
		})
	}
}

// TestFailedIndexWrite: indexes are written in the background while the build goes on. A
// write that fails fails the build, names the path, and leaves the tree as it was, with no
// temporary file behind.
func TestFailedIndexWrite(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.mustBuild()
	// A file where the amd64 index's by-hash directory should be: the link of the new
	// index there cannot be made.
	byHash := r.tree(amd64Dir + "by-hash/SHA256")
	if err := os.RemoveAll(byHash); err != nil {
		t.Fatal(err)
	}
	writeFile(t, byHash, []byte("in the way\n"))
	before := snapshot(t, r.Opts.TreeDir)
	writeOne(t, r.in("new"), "newpkg", "1.0-1", "amd64", "pkg000000")
	_, err := r.build()
	if err == nil {
		t.Fatal("build succeeded with the by-hash directory blocked")
	}
	if !strings.Contains(err.Error(), "by-hash/SHA256") {
		t.Errorf("error does not name the by-hash path: %v", err)
	}
	if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) > 0 {
		t.Errorf("a failed build changed the tree: %q", d)
	}
	noStaging(t, r.Opts.TreeDir)
}

// TestStagingLeftByCrash: files a crashed build left in the staging directory never become
// visible, and the next build removes them, whether it changes the tree or finds it up to
// date.
func TestStagingLeftByCrash(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 2})
	r.mustBuild()
	noStaging(t, r.Opts.TreeDir)
	for _, change := range []bool{false, true} {
		writeFile(t, filepath.Join(r.Opts.TreeDir, ".armor-staging", "0123456789ab-Packages"), []byte("half an index\n"))
		if change {
			writeOne(t, r.in("new"), "newpkg", "1.0-1", "amd64", "pkg000000")
		}
		res := r.mustBuild()
		if res.UpToDate == change {
			t.Fatalf("change %v: up to date %v", change, res.UpToDate)
		}
		noStaging(t, r.Opts.TreeDir)
	}
}

// TestPoolOnAnotherMount: a tree whose pool/ is a symbolic link to another file system
// (/dev/shm, a tmpfs) builds: its files cannot be renamed in from the tree's staging
// directory, so they are staged beside their targets, and nothing staged stays behind.
func TestPoolOnAnotherMount(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 2})
	elsewhere, err := os.MkdirTemp("/dev/shm", "armor-pool-")
	if err != nil {
		t.Fatalf("this test needs a tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	if err := os.MkdirAll(r.Opts.TreeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(r.Opts.TreeDir, "pool")); err != nil {
		t.Fatal(err)
	}
	r.mustBuild()
	writeOne(t, r.in("new"), "newpkg", "1.0-1", "amd64", "pkg000000")
	res := r.mustBuild()
	if res.Stats.Added != 1 {
		t.Fatalf("stats %+v; want one package added", res.Stats)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "main", "n", "newpkg", "newpkg_1.0-1_amd64.deb")); err != nil {
		t.Errorf("the new pool file is not on the other file system: %v", err)
	}
	noStaging(t, r.Opts.TreeDir)
	err = filepath.WalkDir(elsewhere, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".armor-") {
			t.Errorf("left behind: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNothingStaged: a build that changes the release but no file of the tree (here, only
// the repository's name, which the manifest alone records) leaves no staging directory.
func TestNothingStaged(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true})
	r.mustBuild()
	r.Opts.Repository += "-renamed"
	res := r.mustBuild()
	if res.UpToDate || res.Stats.FilesWritten != 0 {
		t.Fatalf("up to date %v, %d files written; want a new release and no file", res.UpToDate, res.Stats.FilesWritten)
	}
	noStaging(t, r.Opts.TreeDir)
}

// noStaging fails t when the tree holds a staging directory.
func noStaging(t *testing.T, tree string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(tree, ".armor-staging")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging directory in the tree (%v)", err)
	}
}

// TestLoadPrevious: a build given a loader for the previous manifest, which it calls while
// listing the inputs, behaves as one given the manifest; the loader's error fails it.
func TestLoadPrevious(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 2})
	first := r.mustBuild()
	o := r.Opts
	calls := 0
	o.LoadPrevious = func() (*manifest.Manifest, error) { calls++; return first.Manifest, nil }
	res, err := gen.Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !res.UpToDate || res.Manifest != first.Manifest {
		t.Errorf("loader called %d times, up to date %v; want once, up to date with the loaded manifest", calls, res.UpToDate)
	}

	before := snapshot(t, r.Opts.TreeDir)
	writeOne(t, r.in("new"), "newpkg", "1.0-1", "amd64", "pkg000000")
	broken := errors.New("manifest.toml: line 3: broken")
	o.LoadPrevious = func() (*manifest.Manifest, error) { return nil, broken }
	if _, err := gen.Build(context.Background(), o); !errors.Is(err, broken) {
		t.Errorf("build with a failing loader: %v; want its error", err)
	}
	if d := diffSnapshots(before, snapshot(t, r.Opts.TreeDir)); len(d) > 0 {
		t.Errorf("a build that could not load its previous manifest changed the tree: %q", d)
	}

	// A build that fails on its inputs does not leave the loader running.
	writeFile(t, r.in("bad/text.deb"), []byte("this is not an ar archive\n"))
	var returned, lateCall atomic.Bool
	o.LoadPrevious = func() (*manifest.Manifest, error) {
		time.Sleep(20 * time.Millisecond)
		lateCall.Store(returned.Load())
		return first.Manifest, nil
	}
	if _, err := gen.Build(context.Background(), o); err == nil {
		t.Fatal("a build with a bad input succeeded")
	}
	returned.Store(true)
	time.Sleep(50 * time.Millisecond)
	if lateCall.Load() {
		t.Error("the previous manifest was still being loaded after Build returned")
	}
}

// TestPoolFilesLinked: a pool file is a copy of its input by default, so that an input
// rewritten in place leaves the tree as it was, and with LinkPool a hard link to it on
// the tree's file system (Stats.FilesLinked counts them); either way the release lists
// the input's bytes.
func TestPoolFilesLinked(t *testing.T) {
	for _, link := range []bool{false, true} {
		t.Run(fmt.Sprintf("link=%v", link), func(t *testing.T) {
			r := newRepo(t, repoConfig{Synth: 4})
			r.Opts.LinkPool = link
			res := r.mustBuild()
			if want := map[bool]int{false: 0, true: 4}[link]; res.Stats.FilesLinked != want {
				t.Errorf("%d pool files linked, want %d (stats %+v)", res.Stats.FilesLinked, want, res.Stats)
			}
			inputs, err := filepath.Glob(r.in("synth/*.deb"))
			if err != nil || len(inputs) != 4 {
				t.Fatalf("inputs %v (%v)", inputs, err)
			}
			byName := map[string]string{}
			for _, in := range inputs {
				byName[filepath.Base(in)] = in
			}
			for _, p := range res.Manifest.Packages {
				in, ok := byName[path.Base(p.Path)]
				if !ok {
					t.Fatalf("no input named like %s", p.Path)
				}
				a, errA := os.Stat(in)
				b, errB := os.Stat(r.tree(p.Path))
				if errA != nil || errB != nil {
					t.Fatal(errA, errB)
				}
				if os.SameFile(a, b) != link {
					t.Errorf("%s: linked to its input %v, want %v", p.Path, os.SameFile(a, b), link)
				}
				if got := sha256Hex(readFile(t, r.tree(p.Path))); got != p.SHA256 {
					t.Errorf("%s: sha256 %s, the release lists %s", p.Path, got, p.SHA256)
				}
				// The input rewritten in place, as cp and dpkg-deb write over a file:
				// a copy keeps the bytes the release lists.
				if !link {
					if err := os.WriteFile(in, []byte("rewritten in place"), 0o644); err != nil {
						t.Fatal(err)
					}
					if got := sha256Hex(readFile(t, r.tree(p.Path))); got != p.SHA256 {
						t.Errorf("%s: an input rewritten in place changed the tree's file", p.Path)
					}
				}
			}
		})
	}
}
