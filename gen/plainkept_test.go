package gen_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/debian/release"
)

// TestUncompressedIndexesKept: the tree and the manifest have the .gz and .xz of each
// Packages index but not its uncompressed form, which Release lists and the build cache
// keeps. The next build takes the parent's stanzas from the kept copy, or, when that is
// damaged, from the tree's .gz, reading no .deb again; the cache then holds exactly the
// copies the new Release lists.
func TestUncompressedIndexesKept(t *testing.T) {
	const amd64 = "dists/stable/main/binary-amd64/Packages"
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, r *repo)
	}{
		{"the kept copy, without the tree's .gz", func(t *testing.T, r *repo) {
			if err := os.Remove(r.tree(amd64 + ".gz")); err != nil {
				t.Fatal(err)
			}
			// As an armor that published it left it: gone once it no longer matches.
			writeFile(t, r.tree(amd64), packagesFile(t, r, "arm64"))
		}},
		{"a damaged kept copy", func(t *testing.T, r *repo) {
			for _, f := range keptPlains(t, r) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 1
				writeFile(t, f, data)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 4})
			res := r.mustBuild()
			for _, f := range res.Manifest.Files {
				if b := path.Base(f.Path); b == "Packages" || b == "Sources" || strings.HasPrefix(b, "Contents-") && !strings.HasSuffix(b, ".gz") || (strings.Contains(f.Path, "/by-hash/") && f.Size > 0 && strings.HasPrefix(readFileT(t, r.tree(f.Path)), "Package: ")) {
					t.Errorf("the manifest lists %s, an uncompressed index", f.Path)
				}
			}
			if len(keptPlains(t, r)) != 4 {
				t.Fatalf("the cache keeps %d uncompressed indexes, want a Packages and a Contents per architecture", len(keptPlains(t, r)))
			}
			before := packagesFile(t, r, "amd64")
			tc.prepare(t, r)
			writeOne(t, r.in("new"), "newpkg", "1.5-1", "amd64", "pkg000000")
			res = r.mustBuild()
			if res.Stats.Read != 1 {
				t.Errorf("the build read %d inputs, want only the new one", res.Stats.Read)
			}
			after := packagesFile(t, r, "amd64") // and the tree holds no uncompressed index
			for _, st := range bytes.SplitAfter(bytes.TrimSuffix(before, []byte("\n")), []byte("\n\n")) {
				if !bytes.Contains(after, st) {
					t.Errorf("the new index lacks the parent's stanza\n%s", st)
				}
			}
			rel, err := release.Parse([]byte(readFileT(t, r.tree("dists/stable/Release"))))
			if err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for p, d := range rel.Sums {
				if b := path.Base(p); b == "Packages" || strings.HasPrefix(b, "Contents-") && !strings.HasSuffix(b, ".gz") {
					want = append(want, d.SHA256)
				}
			}
			for _, f := range keptPlains(t, r) {
				got = append(got, filepath.Base(f))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the cache keeps %v, want the uncompressed indexes Release lists, %v", got, want)
			}
		})
	}
}

// keptPlains returns the files of the uncompressed indexes the build cache keeps, sorted.
func keptPlains(t *testing.T, r *repo) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(r.Opts.CacheDir, "plain", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readFileT(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestWarmBuildRewritesKeptIndex: a warm build that adds a package keeps the new
// uncompressed Packages by rewriting the parent's kept copy (the same file), which then
// holds exactly the index Release lists; the build after it splices from that copy again.
func TestWarmBuildRewritesKeptIndex(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 40})
	r.mustBuild()
	for i := range 2 {
		before := keptFileOf(t, r, packagesFile(t, r, "amd64"))
		held, err := os.Open(before) // keeps its inode number from another file's
		if err != nil {
			t.Fatal(err)
		}
		st, err := held.Stat()
		if err != nil {
			t.Fatal(err)
		}
		writeOne(t, r.in(fmt.Sprintf("new%d", i)), fmt.Sprintf("pkg%06dnew", 20+i), "1.5-1", "amd64", "pkg000000")
		if res := r.mustBuild(); res.Stats.Read != 1 {
			t.Fatalf("build %d read %d inputs, want only the new one", i, res.Stats.Read)
		}
		after := keptFileOf(t, r, packagesFile(t, r, "amd64"))
		at, err := os.Stat(after)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(st, at) {
			t.Errorf("build %d wrote the kept Packages anew instead of rewriting the parent's copy", i)
		}
		held.Close()
	}
}

// keptFileOf returns the build cache's file keeping the uncompressed index data, after
// checking that it holds data and its trailer.
func keptFileOf(t *testing.T, r *repo, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	f := filepath.Join(r.Opts.CacheDir, "plain", hex.EncodeToString(sum[:]))
	kept, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("the cache does not keep the index Release lists: %v", err)
	}
	if len(kept) != len(data)+8 || !bytes.Equal(kept[:len(data)], data) {
		t.Fatalf("the kept copy %s is not the index", f)
	}
	return f
}

// TestWarmBuildsOfALargeIndexEqualFull: an index of several chunks, changed at its start,
// in its middle and at its end by warm builds (each spliced from the parent's kept copy
// and built on it, see index.Base), ends byte for byte as a build from nothing makes it.
func TestWarmBuildsOfALargeIndexEqualFull(t *testing.T) {
	cfg := repoConfig{Synth: 600, Archs: []string{"amd64"}} // about 400 KB of stanzas
	full, inc := newRepo(t, cfg), newRepo(t, cfg)

	debs, err := filepath.Glob(inc.in("synth/*.deb"))
	if err != nil || len(debs) != 600 {
		t.Fatalf("%d synthetic packages (%v)", len(debs), err)
	}
	hold := t.TempDir()
	moved := []string{debs[300], debs[0], debs[599], debs[301]}
	for _, p := range moved {
		if err := os.Rename(p, filepath.Join(hold, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	inc.mustBuild()
	for _, p := range moved {
		if err := os.Rename(filepath.Join(hold, filepath.Base(p)), p); err != nil {
			t.Fatal(err)
		}
		if res := inc.mustBuild(); res.Stats.Read != 1 {
			t.Fatalf("adding %s: read %d files, want 1", filepath.Base(p), res.Stats.Read)
		}
	}
	mFull := full.buildAsOf(inc.Last)
	assertSameRelease(t, mFull, inc.Last)
	assertSameTree(t, mFull, full.Opts.TreeDir, inc.Opts.TreeDir, publicKeyring(t, full.Opts.Key))
}

// TestFreshRunnerKeepsNoPlain: a fresh runner, whose tree came from the store, keeps no
// uncompressed index in its cache (the cache goes with the runner). If the cache stays,
// the next build takes the parent's stanzas from the tree's .gz, makes the release the
// machine that built the parent makes, and keeps the copies it writes from then on.
func TestFreshRunnerKeepsNoPlain(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 6})
	parent := r.mustBuild().Manifest
	if len(keptPlains(t, r)) == 0 {
		t.Fatal("the first build on the machine that built the parent keeps no uncompressed index")
	}
	st := storeOf(t, r.Opts.TreeDir, parent)

	f := freshRunner(t, r)
	f.Last = parent
	f.Opts.Fetch = st.fetch
	newDeb := writeOne(t, f.in("new"), "newpkg", "1.0", "amd64", "")
	f.mustBuild()
	if got := keptPlains(t, f); len(got) != 0 {
		t.Errorf("the fresh runner's cache keeps %d uncompressed indexes, want none", len(got))
	}
	copyFile(t, newDeb, r.in("newpkg_1.0_amd64.deb"))
	r.mustBuild()

	// The runner kept its cache: its next build is as the parent's machine's.
	other := writeOne(t, f.in("other"), "otherpkg", "2.0", "amd64", "")
	got := f.mustBuild()
	if got.Stats.Read != 1 {
		t.Errorf("the runner's second build read %d inputs, want the new one only", got.Stats.Read)
	}
	copyFile(t, other, r.in("otherpkg_2.0_amd64.deb"))
	assertSameRelease(t, got.Manifest, r.mustBuild().Manifest)
	// It keeps those it wrote (the others' are made from the tree's .gz when next needed),
	// each one the parent's machine keeps.
	kept := map[string]bool{}
	for _, k := range keptPlains(t, r) {
		kept[filepath.Base(k)] = true
	}
	got2 := keptPlains(t, f)
	if len(got2) == 0 {
		t.Error("the runner's second build keeps no uncompressed index")
	}
	for _, k := range got2 {
		if !kept[filepath.Base(k)] {
			t.Errorf("the runner keeps %s, which the parent's machine does not", filepath.Base(k))
		}
	}
}
