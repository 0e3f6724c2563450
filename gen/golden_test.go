package gen_test

import (
	"bytes"
	"crypto"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from this build's output")

const goldenDir = "../testdata/golden"

// goldenCases are tiny repositories built with a fixed key and date. Each case's expected
// output lives in testdata/golden/<name>/: manifest.toml (with the signature files' sums
// and the release id masked, since signatures are not deterministic) and every file of the
// tree that a person can read: each Release and plain Packages. Compressed indexes and
// by-hash copies are covered by the manifest's sums; InRelease and Release.gpg are not
// kept, as a new signature differs each time.
var goldenCases = []struct {
	name  string
	key   string
	setup func(r *repo)
}{
	{
		// The four real debs and two synthetic ones in one suite and component.
		name:  "tiny",
		key:   "rsa",
		setup: func(r *repo) {},
	},
	{
		// Two suites: "stable" (codename bookworm, Valid-Until a week after the date, real
		// debs in main and synthetic ones in contrib) and "testing" (codename trixie, only
		// the synthetic ones, one architecture), signed by the EdDSA key.
		name: "two-suites",
		key:  "eddsa",
		setup: func(r *repo) {
			r.Opts.Suites = []gen.Suite{
				{
					Suite: "stable", Codename: "bookworm", Description: "the stable suite",
					Components:    []string{"main", "contrib"},
					Architectures: []string{"amd64", "arm64"},
					ValidFor:      7 * 24 * time.Hour,
					Inputs: map[string][]string{
						"main":    {"in/real/*.deb"},
						"contrib": {"in/synth/*.deb"},
					},
				},
				{
					Suite: "testing", Codename: "trixie",
					Components:    []string{"main"},
					Architectures: []string{"amd64"},
					Inputs:        map[string][]string{"main": {"in/synth/*.deb"}},
				},
			}
		},
	},
}

// TestGolden builds each golden case and compares its readable output with
// testdata/golden/<case>/. Run `go test ./gen/ -run TestGolden -update` to rewrite the
// files after an intended change, and review the diff: it is the change of behaviour.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 2, Key: tc.key, Hash: crypto.SHA512})
			tc.setup(r)
			res := r.mustBuild()
			got := goldenOutput(t, r, res.Manifest)
			dir := filepath.Join(goldenDir, tc.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				for p, data := range got {
					writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), data)
				}
				return
			}
			want := readGolden(t, dir)
			for _, p := range sortedKeys(want) {
				if _, ok := got[p]; !ok {
					t.Errorf("%s: the golden file exists but the build no longer writes it (run with -update if intended)", p)
				}
			}
			for _, p := range sortedKeys(got) {
				w, ok := want[p]
				if !ok {
					t.Errorf("%s: the build writes it but there is no golden file (run with -update)", p)
					continue
				}
				if !bytes.Equal(got[p], w) {
					t.Errorf("%s differs from %s (run with -update if intended):\n%s", p, filepath.Join(dir, p), lineDiff(string(w), string(got[p])))
				}
			}
		})
	}
}

// isSignature reports whether a tree path is a signature file, whose bytes differ on every
// signing.
func isSignature(p string) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	return base == "InRelease" || base == "Release.gpg"
}

// goldenOutput returns the files a golden case compares, by slash path: manifest.toml
// (masked) and every Release and plain Packages of the tree.
func goldenOutput(t *testing.T, r *repo, m *manifest.Manifest) map[string][]byte {
	t.Helper()
	masked := *m
	masked.ID = "(hash of the manifest, which lists the signatures)"
	masked.Files = nil
	for _, f := range m.Files {
		if isSignature(f.Path) {
			f.Size, f.SHA256 = 0, "(signature)"
		}
		masked.Files = append(masked.Files, f)
	}
	data, err := manifest.Marshal(&masked)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{"manifest.toml": data}
	aliases := map[string]bool{} // dists/<suite>/ of suites named apart from their codename
	for _, s := range r.Opts.Suites {
		if s.Suite != "" && s.Suite != s.Codename {
			aliases["dists/"+s.Suite+"/"] = true
		}
	}
	for _, f := range m.Files {
		base := f.Path[strings.LastIndexByte(f.Path, '/')+1:]
		contents := strings.HasPrefix(base, "Contents-") && strings.HasSuffix(base, ".gz")
		if strings.Contains(f.Path, "/by-hash/") || (base != "Release" && base != "Packages.gz" && !contents) {
			continue
		}
		if parts := strings.SplitN(f.Path, "/", 3); aliases[parts[0]+"/"+parts[1]+"/"] {
			continue // the codename's file, through the link (the manifest lists it)
		}
		if base == "Packages.gz" || contents {
			// Published compressed only: its readable form, which Release lists too.
			plain := strings.TrimSuffix(f.Path, ".gz")
			out[plain] = readIndex(t, r, plain)
			continue
		}
		b, err := os.ReadFile(r.tree(f.Path))
		if err != nil {
			t.Fatal(err)
		}
		out[f.Path] = b
	}
	return out
}

func readGolden(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatalf("read golden files (run with -update to create them): %v", err)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lineDiff shows the lines of want and got that differ, as "-want" and "+got", position by
// position after the common prefix and suffix: enough to read a golden mismatch.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "@@ line %d\n", pre+1)
	for _, l := range w[pre : len(w)-suf] {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range g[pre : len(g)-suf] {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}
