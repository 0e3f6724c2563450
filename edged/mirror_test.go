package edged

import (
	"bytes"
	"context"
	"crypto"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
)

// testKeyring is the binary public keyring of the key signedAptRepo signs with.
const testKeyring = "../testdata/keys/rsa.pub.gpg"

// signedAptRepo is aptRepo with InRelease and Release.gpg made by the test RSA key.
func signedAptRepo(t *testing.T, without ...string) map[string][]byte {
	t.Helper()
	tree := aptRepo(t, without...)
	sec, err := os.ReadFile("../testdata/keys/rsa.sec.asc")
	if err != nil {
		t.Fatal(err)
	}
	key, err := sign.ReadSecretKey(bytes.NewReader(sec), nil)
	if err != nil {
		t.Fatal(err)
	}
	in, detached, err := key.SignRelease(context.Background(), tree["dists/stable/Release"], crypto.SHA256, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tree["dists/stable/InRelease"], tree["dists/stable/Release.gpg"] = in, detached
	return tree
}

// need fails the test unless tool is installed, saying how to install it.
func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s not found: run .ci/install-deps", tool)
	}
}

// readTree reads every regular file under root by its slash path.
func readTree(t *testing.T, root string, skip func(string) bool) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		files[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDebmirror: the real debmirror, checking signatures with the repository's keyring,
// mirrors a repository at a hostname's root through the edge. It asks for
// "//dists/stable/Release" and the like, which the edge serves by merging the slashes
// as nginx does.
func TestDebmirror(t *testing.T) {
	need(t, "debmirror")
	need(t, "gpgv")
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := signedAptRepo(t)
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("demo", []string{"127.0.0.1"}, r))
	cfg := testConfig(t, ctl)
	cfg.AccessLog = filepath.Join(t.TempDir(), "access.log")
	e := startEdge(t, cfg, cas)
	e.waitVersion(t, v)

	keyring, err := filepath.Abs(testKeyring)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mirror := filepath.Join(dir, "mirror")
	cmd := exec.Command("debmirror", "--host="+e.addr, "--root=/", "--method=http",
		"--dist=stable", "--section=main", "--arch=amd64", "--nosource", "--diff=none",
		"--rsync-extra=none", "--check-gpg", "--keyring="+keyring, "--verbose", mirror)
	cmd.Env = append(os.Environ(), "HOME="+dir, "GNUPGHOME="+filepath.Join(dir, "gnupg"), "http_proxy=", "HTTP_PROXY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("debmirror: %v\n%s", err, out)
	}
	// What this test is about: debmirror asked for "//dists/...".
	access, err := os.ReadFile(cfg.AccessLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(access), `"uri":"//dists/stable/`) {
		t.Fatalf("debmirror sent no request for //dists/stable/...; access log:\n%s", access)
	}
	got := readTree(t, mirror, func(p string) bool { return p == ".temp" || p == "project" })
	for p, want := range tree {
		if !strings.HasPrefix(p, "pool/") && p != "dists/stable/Release" && p != "dists/stable/Release.gpg" && p != "dists/stable/InRelease" {
			continue
		}
		if !bytes.Equal(got[p], want) {
			t.Errorf("mirror's %s differs from the published file (%d bytes, want %d)", p, len(got[p]), len(want))
		}
	}
	for p := range got {
		if tree[p] == nil {
			t.Errorf("mirror has %s, which the release does not", p)
		}
	}
	if t.Failed() {
		t.Logf("debmirror output:\n%s", out)
	}
}
