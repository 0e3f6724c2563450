package gen_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

const (
	keysDir = "../testdata/keys"
	debsDir = "../testdata/debs"
)

// testDate is the fixed SOURCE_DATE_EPOCH of every test build.
var testDate = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// realDebs are the files of testdata/debs, by name.
var realDebs = []string{
	"libnatpmp-dev_20150609-7.1+b2_amd64.deb",
	"libnatpmp1_20150609-7.1+b2_amd64.deb",
	"natpmp-utils_20150609-7.1_all.deb",
	"natpmpc_20150609-7.1+b2_amd64.deb",
}

// fixtureKey reads testdata/keys/<name>.sec.asc (rsa or eddsa: not encrypted).
func fixtureKey(t testing.TB, name string) *sign.Key {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(keysDir, name+".sec.asc"))
	if err != nil {
		t.Fatalf("read fixture key: %v", err)
	}
	k, err := sign.ReadSecretKey(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatalf("read fixture key %s: %v", name, err)
	}
	return k
}

// publicKeyring returns the binary public keyring of k, as Signed-By and gpgv take it.
func publicKeyring(t testing.TB, k *sign.Key) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := k.WritePublicKeyring(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tool returns the path of an installed program or fails the test.
func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps (%v)", name, err)
	}
	return p
}

// copyFile copies src to dst (creating dst's directory) and returns dst.
func copyFile(t testing.TB, src, dst string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, data)
	return dst
}

// writeFile writes data to path, creating its directory.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo is a test repository: inputs under Base/in, the tree, the cache, and the manifest
// of the last successful build.
type repo struct {
	t    testing.TB
	Base string
	Opts gen.Options
	Last *manifest.Manifest
}

// repoConfig says what newRepo puts in a repository.
type repoConfig struct {
	Real  bool   // copy the four real debs into in/real
	Synth int    // synthetic packages in in/synth (every other one is Architecture: all)
	Key   string // fixture key name; default rsa
	Hash  crypto.Hash
	Archs []string // default amd64, arm64
}

// newRepo lays out inputs under a temporary directory and returns options building one
// suite "stable" with component main from in/**/*.deb.
func newRepo(t testing.TB, c repoConfig) *repo {
	t.Helper()
	base := t.TempDir()
	if c.Real {
		for _, name := range realDebs {
			copyFile(t, filepath.Join(debsDir, name), filepath.Join(base, "in", "real", name))
		}
	}
	if c.Synth > 0 {
		if _, err := synth.Write(filepath.Join(base, "in", "synth"), synth.Options{N: c.Synth, Seed: 7, AllEvery: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Key == "" {
		c.Key = "rsa"
	}
	if len(c.Archs) == 0 {
		c.Archs = []string{"amd64", "arm64"}
	}
	return &repo{t: t, Base: base, Opts: gen.Options{
		Repository:  "test",
		Origin:      "armor test",
		Label:       "armor test",
		Description: "armor test repository",
		Suites: []gen.Suite{{
			Codename: "stable", Components: []string{"main"}, Architectures: c.Archs,
			Inputs: map[string][]string{"main": {"in/**/*.deb"}},
		}},
		BaseDir:  base,
		TreeDir:  filepath.Join(base, "tree"),
		CacheDir: filepath.Join(base, "cache"),
		Key:      fixtureKey(t, c.Key),
		Hash:     c.Hash,
		Date:     testDate,
		Now:      func() time.Time { return testDate }, // Valid-Until is checked against the test's clock
	}}
}

// build runs gen.Build with the previous manifest set and, on success, remembers the
// new manifest as the next build's previous one.
func (r *repo) build() (*gen.Result, error) {
	r.t.Helper()
	o := r.Opts
	o.Previous = r.Last
	res, err := gen.Build(context.Background(), o)
	if err == nil {
		r.Last = res.Manifest
		r.checkEncoded(res)
	}
	return res, err
}

// checkEncoded checks that the manifest file Build hands back is the manifest's own
// encoding, with a valid id.
func (r *repo) checkEncoded(res *gen.Result) {
	r.t.Helper()
	if res.UpToDate {
		if res.Encoded != nil {
			r.t.Error("an up-to-date build returned manifest bytes to write")
		}
		return
	}
	want, err := manifest.Marshal(res.Manifest)
	if err != nil {
		r.t.Fatal(err)
	}
	if !bytes.Equal(res.Encoded, want) {
		r.t.Error("Result.Encoded differs from manifest.Marshal(Result.Manifest)")
	}
	if _, err := manifest.Parse(res.Encoded, "built manifest"); err != nil {
		r.t.Errorf("Result.Encoded does not parse: %v", err)
	}
}

// mustBuild is build that fails the test on error.
func (r *repo) mustBuild() *gen.Result {
	r.t.Helper()
	res, err := r.build()
	if err != nil {
		r.t.Fatalf("build: %v", err)
	}
	if res.Manifest == nil {
		r.t.Fatal("build returned no manifest")
	}
	return res
}

// in returns the path of an input file under Base/in.
func (r *repo) in(rel string) string { return filepath.Join(r.Base, "in", filepath.FromSlash(rel)) }

// tree returns the path of a tree file.
func (r *repo) tree(rel string) string {
	return filepath.Join(r.Opts.TreeDir, filepath.FromSlash(rel))
}

// fileState is what a snapshot records of one file.
type fileState struct {
	SHA256  string
	ModTime time.Time
}

// snapshot returns every regular file under dir (slash paths relative to it) with its
// hash and mtime.
func snapshot(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fileState{SHA256: sha256Hex(data), ModTime: info.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

// diffSnapshots lists the paths added, removed or changed (content or mtime) between two
// snapshots, sorted, each with a one-word reason.
func diffSnapshots(before, after map[string]fileState) []string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, "removed "+p)
		case a.SHA256 != b.SHA256:
			out = append(out, "changed "+p)
		case !a.ModTime.Equal(b.ModTime):
			out = append(out, "touched "+p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p)
		}
	}
	sort.Strings(out)
	return out
}

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// dirFetcher serves a tree from a local directory for gen.VerifyTree.
type dirFetcher string

func (d dirFetcher) Open(_ context.Context, p string) (io.ReadCloser, error) {
	if !fs.ValidPath(p) {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	return os.Open(filepath.Join(string(d), filepath.FromSlash(p)))
}

var _ gen.Fetcher = dirFetcher("")

// stanzas splits a Packages file into its stanzas, each as a map of field to value
// (continuation lines joined with "\n", as in the file).
func stanzas(t testing.TB, data []byte) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, block := range strings.Split(strings.TrimRight(string(data), "\n"), "\n\n") {
		if block == "" {
			continue
		}
		st := map[string]string{}
		last := ""
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				if last == "" {
					t.Fatalf("continuation line before any field: %q", line)
				}
				st[last] += "\n" + line
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("line without a colon in a stanza: %q", line)
			}
			if _, dup := st[k]; dup {
				t.Fatalf("field %s twice in one stanza", k)
			}
			st[k] = strings.TrimSpace(v)
			last = k
		}
		out = append(out, st)
	}
	return out
}

// packagesFile reads dists/stable/main/binary-<arch>/Packages of a tree.
func packagesFile(t testing.TB, r *repo, arch string) []byte {
	t.Helper()
	return readIndex(t, r, "dists/stable/main/binary-"+arch+"/Packages")
}

// readIndex returns the uncompressed Packages, Sources or Contents index rel of a tree,
// which publishes only its compressed forms: decompressed from the .gz, after checking
// that the uncompressed form is not in the tree.
func readIndex(t testing.TB, r *repo, rel string) []byte {
	t.Helper()
	if _, err := os.Stat(r.tree(rel)); err == nil {
		t.Fatalf("the tree holds %s: only its compressed forms are published", rel)
	}
	gz, err := os.ReadFile(r.tree(rel + ".gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("%s.gz: %v", rel, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s.gz: %v", rel, err)
	}
	return data
}

// packageNames returns the Package fields of a Packages file, sorted.
func packageNames(t testing.TB, data []byte) []string {
	t.Helper()
	var names []string
	for _, st := range stanzas(t, data) {
		names = append(names, st["Package"])
	}
	sort.Strings(names)
	return names
}

// writeOne writes one synthetic package into dir (created if needed) and returns its path.
func writeOne(t testing.TB, dir, name, version, arch, depends string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := synth.WriteOne(dir, name, version, arch, depends)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buildAsOf builds from nothing with the date of other, a release a chain of builds made
// (each dated a second after its parent), and returns its manifest.
func (r *repo) buildAsOf(other *manifest.Manifest) *manifest.Manifest {
	r.t.Helper()
	date, err := time.Parse(time.RFC3339, other.Date)
	if err != nil {
		r.t.Fatal(err)
	}
	r.Opts.Date = date
	return r.mustBuild().Manifest
}
