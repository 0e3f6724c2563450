package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestKeyPackage: armor key package writes a keyring package that dpkg-deb reads, that
// armor build publishes with the other packages, and that apt installs: the keyring it
// installs is the published one, and its .sources names the repository with Signed-By.
func TestKeyPackage(t *testing.T) {
	dir, cfg := initAcme(t)
	out := armorOK(t, "-c", cfg, "key", "package", "--out", filepath.Join(dir, "debs"))
	deb := filepath.Join(dir, "debs", "acme-archive-keyring_2026.01.01_all.deb")
	if !strings.Contains(out, deb) {
		t.Fatalf("key package: %s; want it to name %s", out, deb)
	}
	info, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Version", "Architecture").CombinedOutput()
	if err != nil || string(info) != "Package: acme-archive-keyring\nVersion: 2026.01.01\nArchitecture: all\n" {
		t.Fatalf("dpkg-deb --field: %v\n%s", err, info)
	}
	if out, err := exec.Command("dpkg-deb", "--contents", deb).CombinedOutput(); err != nil || !strings.Contains(string(out), "./etc/apt/sources.list.d/acme.sources") {
		t.Fatalf("dpkg-deb --contents: %v\n%s", err, out)
	}
	armorOK(t, "-c", cfg, "build")

	keyring := filepath.Join(dir, "keys", "acme-archive-keyring.gpg")
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{{
		URI: "file:" + filepath.Join(dir, "public"), Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: keyring,
	}}})
	apt.Update(t)
	root := filepath.Join(t.TempDir(), "root")
	apt.Install(t, root, "acme-archive-keyring")
	got, err := os.ReadFile(filepath.Join(root, "usr", "share", "keyrings", "acme-archive-keyring.gpg"))
	want, _ := os.ReadFile(keyring)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("installed keyring: %v; equal to the published one: %v", err, bytes.Equal(got, want))
	}
	sources, err := os.ReadFile(filepath.Join(root, "etc", "apt", "sources.list.d", "acme.sources"))
	if err != nil || !strings.Contains(string(sources), "URIs: http://apt.acme.test/\n") ||
		!strings.Contains(string(sources), "Signed-By: /usr/share/keyrings/acme-archive-keyring.gpg\n") {
		t.Errorf("installed sources: %v\n%s", err, sources)
	}
}

// initAcme runs armor init for repository acme at apt.acme.test (an EdDSA key, no store
// or controld) with hello 1.0-1 in debs/, and returns the directory and armor.toml.
func initAcme(t *testing.T) (dir, cfg string) {
	t.Helper()
	isolate(t)
	t.Setenv("SOURCE_DATE_EPOCH", testDate)
	dir = filepath.Join(t.TempDir(), "repo")
	armorOK(t, "init", "--dir", dir, "--name", "acme", "--hostname", "apt.acme.test", "--key-algo", "eddsa")
	if _, err := synth.WriteOne(filepath.Join(dir, "debs"), "hello", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "armor.toml")
}
