package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// run runs a tool in dir, failing the test (with how to install it) if it is missing or
// fails.
func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// writeSourcePackage makes a real source package hello 1.0-1 (3.0 (quilt)) with
// dpkg-source in dir.
func writeSourcePackage(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join(dir, "hello-1.0")
	for name, content := range map[string]string{
		"README": "hello, source\n",
		"debian/control": "Source: hello\nSection: devel\nPriority: optional\nMaintainer: Test <t@example.org>\n" +
			"Standards-Version: 4.6.2\n\nPackage: hello\nArchitecture: any\nDescription: test\n test package\n",
		"debian/changelog":     "hello (1.0-1) unstable; urgency=medium\n\n  * x\n\n -- Test <t@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n",
		"debian/source/format": "3.0 (quilt)\n",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, "tar", "--exclude=debian", "-czf", "hello_1.0.orig.tar.gz", "hello-1.0")
	run(t, dir, "dpkg-source", "-b", "hello-1.0")
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
}

// TestEdgeSourcesAndUdebs: a source package and an installer package, built by armor,
// pushed, and served by a real edged: armor verify --pool checks every file Sources
// lists through the edge, apt-get source (deb-src) fetches and unpacks the source
// package, and aptly mirrors both (-with-sources -with-udebs) through the edge.
func TestEdgeSourcesAndUdebs(t *testing.T) {
	work := t.TempDir()
	project := filepath.Join(work, "project")
	cas := filepath.Join(work, "store")
	const host = "apt.src.test"
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "edge", "--for", "*", "--action", "read"))
	controldURL := startControld(t, nil, filepath.Join(work, "controld.log"), "controld", "--data-dir", data, "--store", cas)
	armor(t, work, nil, "init", "--dir", project, "--name", "src", "--hostname", host,
		"--key-algo", "rsa3072", "--store", cas, "--controld", controldURL)
	cfgPath := filepath.Join(project, "armor.toml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil || !strings.Contains(string(cfg), `["debs/**/*.deb"]`) {
		t.Fatalf("armor init's armor.toml lacks the input pattern: %v", err)
	}
	cfg = []byte(strings.Replace(string(cfg), `["debs/**/*.deb"]`, `["debs/**/*"]`, 1))
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	debs := filepath.Join(project, "debs")
	writeSourcePackage(t, filepath.Join(debs, "src"))
	udebDir := filepath.Join(work, "udeb")
	for name, content := range map[string]string{
		"DEBIAN/control": "Package: di-hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nPackage-Type: udeb\nSection: debian-installer\nDescription: installer component\n",
		"usr/share/x":    "x\n",
	} {
		p := filepath.Join(udebDir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, work, "dpkg-deb", "--root-owner-group", "--build", udebDir, filepath.Join(debs, "di-hello_1.0_amd64.udeb"))
	armor(t, project, nil, "build")

	edgeAddr, _ := startEdge(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, filepath.Join(work, "edged.log"), "edged",
		"--controld", controldURL, "--store", cas, "--state-dir", filepath.Join(work, "edged"))
	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create")
	armor(t, project, env, "push")
	waitServed(t, edgeAddr, host, filepath.Join(project, "public"))

	keyring := filepath.Join(project, "keys", "src-archive-keyring.gpg")
	proxy := []string{"HTTP_PROXY=http://" + edgeAddr, "http_proxy=http://" + edgeAddr}
	// The .dsc and its two tarballs, and the udeb.
	out := armor(t, project, proxy, "verify", "http://"+host+"/", "--suite", "stable", "--pool", "--keyring", keyring)
	if !strings.Contains(out, "ok: 1 suite(s)") || !strings.Contains(out, "4 pool file(s)") {
		t.Fatalf("verify through the edge: %s", out)
	}

	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "http://" + host + "/", Suites: []string{"stable"}, Components: []string{"main"},
			SignedBy: keyring, Types: "deb-src"}},
		Proxy: "http://" + edgeAddr,
	})
	apt.Update(t)
	dl := t.TempDir()
	cmd := apt.Cmd("source", "hello")
	cmd.Dir = dl
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get source through the edge: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(filepath.Join(dl, "hello-1.0", "README")); err != nil || string(b) != "hello, source\n" {
		t.Errorf("apt-get source did not unpack hello: %v", err)
	}

	if _, err := exec.LookPath("aptly"); err != nil {
		t.Fatal("aptly is not installed: run .ci/install-deps")
	}
	adir := t.TempDir()
	conf := filepath.Join(adir, "aptly.conf")
	if err := os.WriteFile(conf, []byte(`{"rootDir": "`+filepath.Join(adir, "root")+`", "gpgProvider": "internal"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	aptly := func(args ...string) string {
		c := exec.Command("aptly", append([]string{"-config=" + conf}, args...)...)
		c.Env = append(os.Environ(), append(proxy, "HOME="+adir)...)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("aptly %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	aptly("mirror", "create", "-with-sources", "-with-udebs", "-keyring="+keyring, "-architectures=amd64", "m", "http://"+host+"/", "stable", "main")
	aptly("mirror", "update", "-keyring="+keyring, "m")
	shown := aptly("mirror", "show", "-with-packages", "m")
	for _, want := range []string{"hello_1.0-1_source", "di-hello_1.0_amd64"} {
		if !strings.Contains(shown, want) {
			t.Errorf("aptly's mirror through the edge lacks %s:\n%s", want, shown)
		}
	}
}
