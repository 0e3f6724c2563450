package edged

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// TestKeyring: each hostname serves its repository's public key at its root, as the
// binary keyring (/<name>-archive-keyring.gpg) and armored (.asc); gpgv verifies the
// served InRelease with the first and sqv the served Release.gpg with the second.
func TestKeyring(t *testing.T) {
	need(t, "gpgv")
	need(t, "sqv")
	cas := newTestStore()
	ctl := newFakeControld(t)
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", signedAptRepo(t))
	armored, err := os.ReadFile("../testdata/keys/rsa.pub.asc")
	if err != nil {
		t.Fatal(err)
	}
	site := feedSite("demo", []string{hostA, hostB}, r)
	site.Keys = []string{string(armored)}
	v := ctl.set(site)
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)

	wantBin, err := os.ReadFile(testKeyring)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fetch := func(host, p string) string {
		t.Helper()
		resp, body := get(t, e.addr, "GET", host, p)
		wantStatus(t, "GET "+host+p, resp, body, 200)
		if ct := resp.Header.Get("Content-Type"); ct != "application/pgp-keys" && strings.Contains(p, "keyring") {
			t.Errorf("GET %s: Content-Type %q; want application/pgp-keys", p, ct)
		}
		f := filepath.Join(dir, host+strings.ReplaceAll(p, "/", "_"))
		if err := os.WriteFile(f, body, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, host := range []string{hostA, hostB} {
		gpg := fetch(host, "/demo-archive-keyring.gpg")
		if got, _ := os.ReadFile(gpg); !bytes.Equal(got, wantBin) {
			t.Fatalf("%s: served .gpg keyring (%d bytes) is not the repository's binary keyring (%d bytes)", host, len(got), len(wantBin))
		}
		asc := fetch(host, "/demo-archive-keyring.asc")
		ascBody, _ := os.ReadFile(asc)
		blk, err := armor.Decode(bytes.NewReader(ascBody))
		if err != nil || blk.Type != "PGP PUBLIC KEY BLOCK" {
			t.Fatalf("%s: served .asc is not an armored public key block: %v", host, err)
		}
		inRelease := fetch(host, "/dists/stable/InRelease")
		if out, err := exec.Command("gpgv", "--keyring", gpg, inRelease).CombinedOutput(); err != nil {
			t.Fatalf("gpgv --keyring <served .gpg> <served InRelease>: %v\n%s", err, out)
		}
		release, sig := fetch(host, "/dists/stable/Release"), fetch(host, "/dists/stable/Release.gpg")
		if out, err := exec.Command("sqv", "--keyring", asc, sig, release).CombinedOutput(); err != nil {
			t.Fatalf("sqv --keyring <served .asc> <served Release.gpg> <served Release>: %v\n%s", err, out)
		}
		resp, body := get(t, e.addr, "HEAD", host, "/demo-archive-keyring.gpg")
		wantStatus(t, "HEAD keyring", resp, body, 200)
		if resp.ContentLength != int64(len(wantBin)) {
			t.Errorf("HEAD keyring: Content-Length %d; want %d", resp.ContentLength, len(wantBin))
		}
	}
	_, root := get(t, e.addr, "GET", hostA, "/")
	for _, want := range []string{`<a href="demo-archive-keyring.asc">`, `<a href="demo-archive-keyring.gpg">`, `<a href="dists/">`} {
		if !strings.Contains(string(root), want) {
			t.Errorf("root listing lacks %s:\n%s", want, root)
		}
	}
	resp, body := get(t, e.addr, "GET", hostA, "/other-archive-keyring.gpg")
	wantStatus(t, "another repository's keyring name", resp, body, 404)

	// A feed without keys serves none.
	site.Keys = nil
	e.waitVersion(t, ctl.set(site))
	resp, body = get(t, e.addr, "GET", hostA, "/demo-archive-keyring.gpg")
	wantStatus(t, "keyring of a repository without keys", resp, body, 404)
}

// TestKeyringRoutesBadKey: a key that cannot be read is named and skipped; the others
// are served.
func TestKeyringRoutesBadKey(t *testing.T) {
	armored, err := os.ReadFile("../testdata/keys/eddsa.pub.asc")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := keyringRoutes("demo", []string{"not a key", string(armored)})
	if err == nil || !strings.Contains(err.Error(), "key 1") {
		t.Fatalf("error %v; want one naming key 1", err)
	}
	want, _ := os.ReadFile("../testdata/keys/eddsa.pub.gpg")
	if r := routes["demo-archive-keyring.gpg"]; r == nil || !bytes.Equal(r.body, want) {
		t.Fatalf("the readable key is not served")
	}
	if routes, _ := keyringRoutes("demo", []string{"not a key"}); routes != nil {
		t.Fatalf("routes for no readable key: %v", routes)
	}
}
