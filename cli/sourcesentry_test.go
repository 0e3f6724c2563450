package cli_test

import (
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/armor-apt/armor/debian/aptsources"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

var sourcesPre = regexp.MustCompile(`(?s)<pre id="sources">(.*?)</pre>`)

// pageSources returns the .sources entry the repository page of host shows.
func pageSources(t *testing.T, c *cluster, host string) string {
	t.Helper()
	_, body := c.mustGet(t, host, "/", 200)
	m := sourcesPre.FindSubmatch(body)
	if m == nil {
		t.Fatalf("the page of %s shows no sources entry:\n%s", host, body)
	}
	return html.UnescapeString(string(m[1]))
}

// TestOneSourcesEntry: the page's .sources entry and the keyring package's are the same
// bytes (http, as the edge serves; each suite once), README shows that entry, and a user
// who followed the page then installs the keyring package with the real dpkg, which asks
// nothing about the conffile.
func TestOneSourcesEntry(t *testing.T) {
	c := newCluster(t)
	p := c.newProject(t, "acme", "apt.acme.test")
	armor(t, p.dir, nil, "key", "package", "--package-version", "1")
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "hello", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	p.push(t, c)
	m, err := manifest.Load(filepath.Join(p.dir, "manifest.toml"))
	if err != nil {
		t.Fatal(err)
	}
	waitServedRelease(t, c, p.host, m)

	page := pageSources(t, c, p.host)
	deb := filepath.Join(p.dir, "debs", "acme-archive-keyring_1_all.deb")
	x := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	pkg := string(readFileT(t, filepath.Join(x, "etc", "apt", "sources.list.d", "acme.sources")))
	if page != pkg {
		t.Fatalf("the page's entry and the keyring package's differ:\npage:\n%s\npackage:\n%s", page, pkg)
	}
	if want := aptsources.Entry("http://apt.acme.test/", "/usr/share/keyrings/acme-archive-keyring.gpg",
		[]aptsources.Suite{{Name: "stable", Components: []string{"main"}}}); page != want {
		t.Errorf("the page's entry:\n%s\nwant:\n%s", page, want)
	}

	// README's entry, for its example repository, is the same.
	readme := string(readFileT(t, filepath.Join("..", "README.md")))
	want := aptsources.Entry("http://apt.acme.example/", "/usr/share/keyrings/acme-archive-keyring.gpg",
		[]aptsources.Suite{{Name: "stable", Components: []string{"main"}}})
	if !strings.Contains(readme, "cat > /etc/apt/sources.list.d/acme.sources <<EOF\n"+want+"EOF\n") {
		t.Errorf("README does not show the entry the page and the package give:\n%s", want)
	}

	// A user follows the page: the key, then the entry; then installs the package.
	root := t.TempDir()
	_, key := c.mustGet(t, p.host, "/acme-archive-keyring.gpg", 200)
	for f, data := range map[string][]byte{"usr/share/keyrings/acme-archive-keyring.gpg": key, "etc/apt/sources.list.d/acme.sources": []byte(page)} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := apttest.DpkgInstall(t, root, deb); err != nil || strings.Contains(out, "conffile") {
		t.Fatalf("dpkg -i of the keyring package after the page's steps: %v\n%s", err, out)
	}
}

func readFileT(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
