package cli

// Tests of armor export as a user runs it, against a controld in process and a real S3
// server on loopback (cmd/s3server); the exported tree is checked with armor verify and
// read by a real apt-get through file:/.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// newS3ControldSite is a controldSite whose store is a bucket on a real S3 server.
func newS3ControldSite(t *testing.T) controldSite {
	t.Helper()
	srv := s3test.Start(t)
	site := controldSite{remote: srv.Remote("bucket", "armor"), tokenFile: filepath.Join(t.TempDir(), "token")}
	s, err := store.OpenRclone(context.Background(), site.remote)
	if err != nil {
		t.Fatal(err)
	}
	cd := controldtest.Start(t, s)
	if err := os.WriteFile(site.tokenFile, []byte(cd.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	site.url, site.client = cd.URL, cd.Client
	return site
}

// lacking counts the objects of m that a directory holding the tree of old lacks at
// every path of m: what an incremental export must read from the store.
func lacking(old, m *manifest.Manifest) int {
	prev := old.Paths()
	lacks := map[string]bool{}
	for p, o := range m.Paths() {
		if prev[p] != o {
			lacks[o.SHA256] = true
		}
	}
	for p, o := range m.Paths() {
		if prev[p] == o {
			delete(lacks, o.SHA256)
		}
	}
	return len(lacks)
}

// TestExportCommand: armor export writes the pushed release's whole tree from S3 into a
// directory that armor verify accepts and apt-get installs from through file:/; while a
// draft waits, --active exports the active release again, reading nothing; --release
// with a prefix of the draft's id reads only the objects the directory lacks and
// --delete drops the removed package; bad ids and the build's own tree are refused.
func TestExportCommand(t *testing.T) {
	t.Parallel()
	site := newS3ControldSite(t)
	p := site.project(t, "exported")
	armorOK(t, "-c", p.cfg, "repos", "create")
	armorOK(t, "-c", p.cfg, "push")
	m1 := loadManifest(t, p.manifestPath())
	keyring := abs(t, eddsaKeyring)
	dir := filepath.Join(t.TempDir(), "mirror")

	out := armorOK(t, "-c", p.cfg, "export", dir)
	t.Logf("armor export:\n%s", out)
	want := "fetched " + strconv.Itoa(len(m1.Objects())) + " object(s)"
	for _, w := range []string{"exported release " + m1.ID[:12], want, "linked " + strconv.Itoa(len(m1.Paths())-len(m1.Objects())), "kept 0"} {
		if !strings.Contains(out, w) {
			t.Errorf("armor export lacks %q:\n%s", w, out)
		}
	}
	out = armorOK(t, "verify", dir, "--keyring", keyring, "--pool")
	if !strings.Contains(out, "ok: 1 suite(s)") || !strings.Contains(out, strconv.Itoa(testPackagesCount+1)+" pool file(s)") {
		t.Errorf("armor verify of the exported tree: %s", out)
	}
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{{
		URI: "file:" + dir, Suites: []string{testCodename}, Components: []string{"main"}, SignedBy: keyring,
	}}})
	apt.Update(t)
	root := t.TempDir()
	apt.Install(t, root, "exported")
	if _, err := os.Stat(filepath.Join(root, "usr", "share", "doc", "exported")); err != nil {
		t.Errorf("apt-get did not install exported from the exported tree: %v", err)
	}

	// A draft: exported removed, second added.
	matches, _ := filepath.Glob(filepath.Join(p.dir, "debs", "exported_*.deb"))
	for _, f := range matches {
		os.Remove(f)
	}
	p.add(t, "second")
	armorOK(t, "-c", p.cfg, "remove", "exported")
	armorOK(t, "-c", p.cfg, "push", "--no-activate")
	m2 := loadManifest(t, p.manifestPath())

	s, err := store.OpenRclone(context.Background(), site.remote)
	if err != nil {
		t.Fatal(err)
	}
	cas := store.NewCounting(s)
	res, err := runExport(context.Background(), p.cfg, exportOptions{Active: true, Dir: dir, Jobs: 4, Store: cas})
	if err != nil {
		t.Fatal(err)
	}
	if n := cas.Counts(); res.Release != m1.ID || res.Fetched != 0 || n.Open != 1 || res.Kept != len(m1.Paths()) {
		t.Errorf("export --active over its own tree: %+v, store asked %+v; want only the manifest read", res.ExportReport, n)
	}

	cas.Reset()
	res, err = runExport(context.Background(), p.cfg, exportOptions{Release: m2.ID[:10], Dir: dir, Delete: true, Jobs: 4, Store: cas})
	if err != nil {
		t.Fatal(err)
	}
	lacks := lacking(m1, m2)
	if n := cas.Counts(); res.Release != m2.ID || res.Fetched != lacks || n.Open != int64(lacks)+1 || n.Requests() != n.Open {
		t.Errorf("export --release %s: %+v, store asked %+v; want the manifest and the %d objects the directory lacks", m2.ID[:10], res.ExportReport, n, lacks)
	}
	gone := m1.Packages[slices.IndexFunc(m1.Packages, func(p manifest.Package) bool { return p.Name == "exported" })].Path
	if !slices.Contains(res.Deleted, gone) {
		t.Errorf("--delete did not drop %s: %v", gone, res.Deleted)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(gone))); err == nil {
		t.Errorf("%s is still there", gone)
	}
	armorOK(t, "verify", dir, "--keyring", keyring, "--pool")
	apt.Update(t)
	if v := apt.Policy(t, "second"); v != "1.0-1" {
		t.Errorf("apt candidate for second after the export of the draft: %q", v)
	}
	if v := apt.Policy(t, "exported"); v != "" {
		t.Errorf("apt still sees exported after export --delete: %q", v)
	}

	out = armorOK(t, "--json", "-c", p.cfg, "export", dir, "--release", m2.ID, "--verify")
	var js struct {
		Release  string `json:"release"`
		Fetched  int    `json:"fetched"`
		Kept     int    `json:"kept"`
		Verified bool   `json:"verified"`
		From     string `json:"from"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || js.Release != m2.ID || js.Fetched != 0 || js.Kept != len(m2.Paths()) || !js.Verified || js.From != "controld "+site.url {
		t.Errorf("export --json --verify: %v %+v\n%s", err, js, out)
	}

	armorFails(t, 1, []string{"release deadbeef00", "no recorded release", "repository test"}, "-c", p.cfg, "export", dir, "--release", "deadbeef00")
	armorFails(t, 2, []string{`release "abc"`, "at least 4"}, "-c", p.cfg, "export", dir, "--release", "abc")
	armorFails(t, 2, []string{"the tree armor build writes"}, "-c", p.cfg, "export", p.tree())
	link := filepath.Join(t.TempDir(), "tree")
	if err := os.Symlink(p.tree(), link); err != nil {
		t.Fatal(err)
	}
	armorFails(t, 2, []string{"the tree armor build writes"}, "-c", p.cfg, "export", link)
	r := armor(t, "-c", p.cfg, "export", dir, "--release", m2.ID, "--active")
	if r.code != 2 {
		t.Errorf("export --release --active: want a usage error, got %s", r)
	}
}

// TestExportMissingObjectCommand: an object missing from the store fails armor export,
// naming the object, its path and the release.
func TestExportMissingObjectCommand(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, filepath.Join(t.TempDir(), "store"))
	armorOK(t, "-c", p.cfg, "push", "--store-only")
	m := loadManifest(t, p.manifestPath())
	pkg := m.Packages[2]
	if err := p.openStore(t).Delete(context.Background(), pkg.SHA256); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	armorFails(t, 1, []string{"release " + m.ID, "object " + pkg.SHA256, pkg.Path, "missing from store", "once armor push uploaded it"}, "-c", p.cfg, "export", dir)
	if _, err := os.Stat(filepath.Join(dir, "dists", testCodename, "InRelease")); err == nil {
		t.Error("the failed export wrote InRelease")
	}
}

// FuzzReleaseIDArg: releaseIDArg takes exactly 8 to 64 lowercase hex digits.
func FuzzReleaseIDArg(f *testing.F) {
	for _, s := range []string{"", "deadbeef", "DEADBEEF", "deadbee", strings.Repeat("a", 64), strings.Repeat("a", 65), "manifest.toml", "0123456789abcdefg"} {
		f.Add(s)
	}
	ref := regexp.MustCompile(fmt.Sprintf(`^[0-9a-f]{%d,64}$`, minIDPrefix))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := releaseIDArg(s), ref.MatchString(s); got != want {
			t.Errorf("releaseIDArg(%q) = %v, want %v", s, got, want)
		}
	})
}
