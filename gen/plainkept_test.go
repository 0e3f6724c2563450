package gen_test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen/release"
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
