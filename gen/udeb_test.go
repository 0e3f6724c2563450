package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dpkgDeb builds a package with the real dpkg-deb from a control file and writes it to
// out (whose extension is kept: .deb, .udeb or .ddeb).
func dpkgDeb(t testing.TB, out, control string) string {
	t.Helper()
	tool(t, "dpkg-deb")
	dir := filepath.Join(t.TempDir(), "pkg")
	writeFile(t, filepath.Join(dir, "DEBIAN", "control"), []byte(control))
	writeFile(t, filepath.Join(dir, "usr", "share", "doc", "x", "README"), []byte("x\n"))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", dir, out)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	return out
}

const (
	udebControl = "Package: di-hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nPackage-Type: udeb\nSection: debian-installer\nDescription: installer component\n"
	ddebControl = "Package: hello-dbgsym\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nPackage-Type: ddeb\nSection: debug\nDescription: debug symbols\n"
)

// udebRepo is a repository with two binary packages, an installer package (.udeb) and a
// debug package (.ddeb), its inputs matched by one broad pattern.
func udebRepo(t *testing.T) *repo {
	t.Helper()
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].Inputs["main"] = []string{"in/**/*"}
	dpkgDeb(t, r.in("di/di-hello_1.0_amd64.udeb"), udebControl)
	dpkgDeb(t, r.in("dbg/hello-dbgsym_1.0_amd64.ddeb"), ddebControl)
	return r
}

// TestInstallerPackages: a .udeb stays .udeb in the pool and is listed only in
// main/debian-installer/binary-<arch>/Packages (plain, gz, xz, by-hash; one per
// architecture of the suite, so a mirror finds each), never in the regular index; a
// .ddeb keeps its name and is listed in the regular index. An incremental build that
// adds a package elsewhere reuses the installer index.
func TestInstallerPackages(t *testing.T) {
	r := udebRepo(t)
	m := r.mustBuild().Manifest
	paths := map[string]bool{}
	for _, p := range m.Packages {
		paths[p.Path] = true
	}
	for _, p := range []string{"pool/main/d/di-hello/di-hello_1.0_amd64.udeb", "pool/main/h/hello-dbgsym/hello-dbgsym_1.0_amd64.ddeb"} {
		if !paths[p] {
			t.Errorf("the manifest does not list %s", p)
		}
		if _, err := os.Stat(r.tree(p)); err != nil {
			t.Errorf("pool: %v", err)
		}
	}
	regular := packageNames(t, packagesFile(t, r, "amd64"))
	if slices.Contains(regular, "di-hello") || !slices.Contains(regular, "hello-dbgsym") {
		t.Errorf("binary-amd64/Packages lists %v: want hello-dbgsym and not di-hello", regular)
	}
	di := readIndex(t, r, "dists/stable/main/debian-installer/binary-amd64/Packages")
	st := stanzas(t, di)
	if len(st) != 1 || st[0]["Package"] != "di-hello" || st[0]["Filename"] != "pool/main/d/di-hello/di-hello_1.0_amd64.udeb" {
		t.Errorf("debian-installer/binary-amd64/Packages:\n%s", di)
	}
	for _, v := range []string{".gz", ".xz"} {
		data, err := os.ReadFile(r.tree("dists/stable/main/debian-installer/binary-amd64/Packages" + v))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.tree("dists/stable/main/debian-installer/binary-amd64/by-hash/SHA256/" + sha256Hex(data))); err != nil {
			t.Errorf("no by-hash copy of Packages%s: %v", v, err)
		}
	}
	rel, err := os.ReadFile(r.tree("dists/stable/Release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"amd64", "arm64"} {
		for _, v := range []string{"", ".gz", ".xz"} {
			if !strings.Contains(string(rel), " main/debian-installer/binary-"+a+"/Packages"+v+"\n") {
				t.Errorf("Release does not list main/debian-installer/binary-%s/Packages%s", a, v)
			}
		}
	}

	// Adding a regular package leaves the installer indexes as they are.
	before := snapshot(t, filepath.Join(r.Opts.TreeDir, "dists/stable/main/debian-installer"))
	writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
	if res := r.mustBuild(); res.Stats.Read != 1 {
		t.Errorf("incremental build read %d inputs, want 1", res.Stats.Read)
	}
	if d := diffSnapshots(before, snapshot(t, filepath.Join(r.Opts.TreeDir, "dists/stable/main/debian-installer"))); len(d) > 0 {
		t.Errorf("adding a regular package changed the installer indexes: %v", d)
	}

	// A udeb named .deb would be listed for normal systems: refused, naming the file.
	bad := dpkgDeb(t, r.in("di/other_1.0_amd64.deb"), strings.Replace(udebControl, "di-hello", "other", 1))
	if _, err := r.build(); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "Package-Type") {
		t.Errorf("a udeb named .deb: %v", err)
	}
}

// TestAptlyMirrorUdebs: the real aptly mirrors the installer packages (-with-udebs).
func TestAptlyMirrorUdebs(t *testing.T) {
	tool(t, "aptly")
	r := udebRepo(t)
	r.mustBuild()
	srv := serveTree(t, r.Opts.TreeDir)
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	dir := t.TempDir()
	aptly(t, dir, "mirror", "create", "-with-udebs", "-keyring="+keyring, "-architectures=amd64", "m", srv.URL+"/", "stable", "main")
	aptly(t, dir, "mirror", "update", "-keyring="+keyring, "m")
	out := aptly(t, dir, "mirror", "show", "-with-packages", "m")
	for _, want := range []string{"di-hello_1.0_amd64", "hello-dbgsym_1.0_amd64"} {
		if !strings.Contains(out, want) {
			t.Errorf("aptly's mirror lacks %s:\n%s", want, out)
		}
	}
}
