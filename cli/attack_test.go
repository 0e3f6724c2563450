package cli_test

// The attack catalogue of docs/security.md, after The Update Framework's list of
// attacks. The attacker holds what a CI runner holds but the key: a token that may push
// and activate on the repository, and write access to its store. Everything is real: the
// armor binary builds and pushes, controld and edged run as processes, apt-get is the
// client, and direct downloads are plain HTTP GETs, as curl makes them.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// attackHost is the victim repository's hostname.
const attackHost = "apt.victim.test"

// attacker is someone with the victim's push and activate token and its store's
// credentials.
type attacker struct {
	c     *cluster
	p     *project
	cl    *client.Client
	store store.Store
	// v1 and v2 are the two releases the victim pushed, v2 active.
	v1, v2 *manifest.Manifest
	v1Sum  string // the manifest object of v1
}

// newVictim pushes two releases of repository "victim" (hello-victim 1.0, then 2.0 and
// tools-victim 1.0) and returns the attacker of it.
func newVictim(t *testing.T, tweak ...func(p *project)) *attacker {
	t.Helper()
	c := newCluster(t)
	p := c.newProject(t, "victim", attackHost)
	for _, fn := range tweak {
		fn(p)
	}
	a := &attacker{c: c, p: p}
	p.setDebs(t, []pkg{{"hello-victim", "1.0", ""}})
	p.build(t)
	p.push(t, c)
	a.v1 = p.manifest(t)
	p.setDebs(t, []pkg{{"hello-victim", "2.0", ""}, {"tools-victim", "1.0", ""}})
	p.build(t)
	p.push(t, c)
	a.v2 = p.manifest(t)
	secret := strings.TrimSpace(armor(t, p.dir, c.env(), "tokens", "create", "ci-victim", "--for", "victim", "--action", "push", "--action", "activate"))
	a.cl = client.New("http://"+c.controldAddr, secret, http.DefaultClient)
	st, err := store.OpenRclone(context.Background(), c.store)
	if err != nil {
		t.Fatal(err)
	}
	a.store = st
	data, err := manifest.Marshal(a.v1)
	if err != nil {
		t.Fatal(err)
	}
	a.v1Sum = sha256Hex(data)
	waitServedRelease(t, c, attackHost, a.v2)
	return a
}

// manifest reads the project's manifest.
func (p *project) manifest(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(filepath.Join(p.dir, "manifest.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// put uploads bytes to the store, as the store's credentials allow.
func (a *attacker) put(t *testing.T, data []byte) string {
	t.Helper()
	sum := sha256Hex(data)
	if _, err := a.store.Put(context.Background(), sum, int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return sum
}

// forge seals m (its id recomputed), uploads it and asks controld to record and activate
// it in place of the active release, as a push would.
func (a *attacker) forge(t *testing.T, m *manifest.Manifest) error {
	t.Helper()
	m.ID = ""
	if err := manifest.Seal(m); err != nil {
		t.Fatal(err)
	}
	data, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return a.record(t, a.put(t, data), false)
}

// record asks controld to record the manifest object sum and activate it in place of v2.
func (a *attacker) record(t *testing.T, sum string, rollback bool) error {
	t.Helper()
	_, err := a.cl.Record(context.Background(), "victim", api.RecordRequest{Manifest: sum, Activate: true, ExpectActive: a.v2.ID, Rollback: rollback})
	return err
}

// refused checks that controld refused with status and code and a message holding want.
func refused(t *testing.T, err error, status int, code string, want ...string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("controld answered %v; want %d %s", err, status, code)
	}
	for _, w := range want {
		if !strings.Contains(ae.Message, w) {
			t.Errorf("controld's message %q lacks %q", ae.Message, w)
		}
	}
}

// stillV2 checks that v2 is still the active release, the edge serves its InRelease,
// and a GET of each of its pool files gets the bytes the signed index lists.
func (a *attacker) stillV2(t *testing.T) {
	t.Helper()
	st, err := a.cl.Status(context.Background(), "victim")
	if err != nil || st.Active == nil || st.Active.Release != a.v2.ID {
		t.Fatalf("status %+v, %v; want v2 %s active", st, err, a.v2.ID)
	}
	waitServedRelease(t, a.c, attackHost, a.v2)
	for _, pk := range a.v2.Packages {
		resp, body := a.c.mustGet(t, attackHost, "/"+pk.Path, 200)
		if sha256Hex(body) != pk.SHA256 || checkETag(resp, body) != nil {
			t.Errorf("GET /%s: sha256 %s, want the signed %s", pk.Path, sha256Hex(body), pk.SHA256)
		}
	}
}

// apt returns an apt-get that uses the victim's repository through the edge, updated.
func (a *attacker) apt(t *testing.T) *apttest.Apt {
	t.Helper()
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{a.p.source()}, Proxy: "http://" + a.c.edge})
	apt.Update(t)
	return apt
}

// signedDeb is the package's .deb as the victim built it.
func (a *attacker) signedDeb(t *testing.T, name string) (manifest.Package, []byte) {
	t.Helper()
	for _, pk := range a.v2.Packages {
		if pk.Name == name {
			data, err := os.ReadFile(filepath.Join(a.p.tree(), filepath.FromSlash(pk.Path)))
			if err != nil {
				t.Fatal(err)
			}
			return pk, data
		}
	}
	t.Fatalf("no package %s in v2", name)
	return manifest.Package{}, nil
}

// TestAttackArbitraryPackage: the attacker uploads its own bytes and posts a manifest
// whose hello-victim points at them (sha256 and size swapped, id recomputed, on the
// active release). controld refuses it, naming the suite, index and package; the edge
// keeps serving the signed .deb at the official path, to apt and to a plain GET.
func TestAttackArbitraryPackage(t *testing.T) {
	a := newVictim(t)
	evil := []byte("#!/bin/sh\necho owned\n")
	a.put(t, evil)
	m := *a.v2
	m.Parent = a.v2.ID
	m.Packages = append([]manifest.Package(nil), a.v2.Packages...)
	for i := range m.Packages {
		if m.Packages[i].Name == "hello-victim" {
			m.Packages[i].SHA256, m.Packages[i].Size = sha256Hex(evil), int64(len(evil))
		}
	}
	refused(t, a.forge(t, &m), 422, api.CodeInvalidRelease,
		"suite stable, index main/binary-amd64/Packages", "package hello-victim 2.0 (amd64)", "the manifest has sha256 "+sha256Hex(evil))
	a.stillV2(t)
	pk, signed := a.signedDeb(t, "hello-victim")
	files := a.apt(t).Download(t, "hello-victim")
	got, err := os.ReadFile(files[0])
	if err != nil || !bytes.Equal(got, signed) {
		t.Fatalf("apt-get download hello-victim: %d bytes, %v; want the signed %s", len(got), err, pk.SHA256)
	}
}

// TestAttackExtraneousPackage: a manifest with an extra [[package]] that no signed
// index lists (a dependency the attacker would have apt pull in) is refused; the edge
// serves nothing at its path, and neither its listings nor the repository page show it.
func TestAttackExtraneousPackage(t *testing.T) {
	a := newVictim(t)
	evil := []byte("not a package anyone signed\n")
	a.put(t, evil)
	const path = "pool/main/e/evil-dep/evil-dep_1.0_amd64.deb"
	m := *a.v2
	m.Parent = a.v2.ID
	m.Packages = append(append([]manifest.Package(nil), a.v2.Packages...), manifest.Package{Suite: "stable", Component: "main",
		Name: "evil-dep", Version: "1.0", Architecture: "amd64", Path: path, Size: int64(len(evil)), SHA256: sha256Hex(evil)})
	m.Sort()
	refused(t, a.forge(t, &m), 422, api.CodeInvalidRelease,
		"package evil-dep 1.0 (amd64) in stable/main at "+path+": the signed index does not list it")
	a.stillV2(t)
	a.c.mustGet(t, attackHost, "/"+path, 404)
	for _, page := range []string{"/", "/pool/main/"} {
		if _, body := a.c.mustGet(t, attackHost, page, 200); bytes.Contains(body, []byte("evil-dep")) || bytes.Contains(body, []byte(`href="e/"`)) {
			t.Errorf("%s shows evil-dep or its directory:\n%s", page, body)
		}
	}
	a.c.mustGet(t, attackHost, "/pool/main/e/evil-dep/", 404)
	if out := a.apt(t).Policy(t, "evil-dep"); out != "" {
		t.Errorf("apt knows evil-dep: %q", out)
	}
}

// TestAttackRollback: the manifest of the earlier release posted again with activate
// and the current expect_active is refused (it is not built on the active release), and
// so is a forged copy of it built on the active release (its signed Date is older). An
// explicit rollback with the same token goes through, as the token allows, and says so
// in the history; an apt that has the newer InRelease keeps it.
func TestAttackRollback(t *testing.T) {
	a := newVictim(t)
	apt := a.apt(t)
	refused(t, a.record(t, a.v1Sum, false), 409, api.CodeNotOnActiveLine, "is not built on the active release "+a.v2.ID)
	m := *a.v1
	m.Parent = a.v2.ID
	m.Date = time.Now().UTC().Format(time.RFC3339) // the manifest's own date is not what counts
	refused(t, a.forge(t, &m), 409, api.CodeOlderRelease, "suite stable of release", "older than in the active release "+a.v2.ID)
	a.stillV2(t)
	apt.Update(t)
	if got := apt.Policy(t, "hello-victim"); got != "2.0" {
		t.Fatalf("apt candidate %q, want 2.0", got)
	}

	act, err := a.cl.Rollback(context.Background(), "victim", a.v2.ID)
	if err != nil || !act.Rollback || act.To != a.v1.ID {
		t.Fatalf("explicit rollback: %+v, %v", act, err)
	}
	waitServedRelease(t, a.c, attackHost, a.v1)
	hist, err := a.cl.History(context.Background(), "victim")
	if err != nil || !hist[len(hist)-1].Rollback || hist[len(hist)-1].By != "ci-victim" {
		t.Errorf("history %+v, %v: want the rollback by ci-victim", hist, err)
	}
	apt.Update(t)
	if got := apt.Policy(t, "hello-victim"); got != "2.0" {
		t.Errorf("after the rollback an apt that had v2 sees candidate %q; want it to keep 2.0", got)
	}
}

// TestAttackDeletedRelease: a release that was deleted, posted again with activate, is
// refused.
func TestAttackDeletedRelease(t *testing.T) {
	a := newVictim(t)
	a.p.setDebs(t, []pkg{{"hello-victim", "3.0", ""}, {"tools-victim", "1.0", ""}})
	a.p.build(t)
	armor(t, a.p.dir, a.c.env(), "push", "--no-activate")
	draft := a.p.manifest(t)
	armor(t, a.p.dir, a.c.env(), "releases", "delete", draft.ID)
	data, err := manifest.Marshal(draft)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, a.record(t, sha256Hex(data), false), 409, api.CodeDeletedRelease, "release "+draft.ID+" was deleted at ")
	a.stillV2(t)
}

// TestAttackMixAndMatch: the active release's signed InRelease served with the earlier
// release's Packages.gz, or with the earlier index's by-hash copy beside its own, is
// refused: each dists file must be what the signed Release lists.
func TestAttackMixAndMatch(t *testing.T) {
	a := newVictim(t)
	const gz = "dists/stable/main/binary-amd64/Packages.gz"
	var old manifest.File
	for _, f := range a.v1.Files {
		if f.Path == gz {
			old = f
		}
	}
	m := *a.v2
	m.Parent = a.v2.ID
	m.Files = append([]manifest.File(nil), a.v2.Files...)
	for i := range m.Files {
		if m.Files[i].Path == gz {
			m.Files[i] = old
		}
	}
	refused(t, a.forge(t, &m), 422, api.CodeInvalidRelease, gz+": Release lists sha256", "the manifest has sha256 "+old.SHA256)
	m.Files = append(append([]manifest.File(nil), a.v2.Files...),
		manifest.File{Path: "dists/stable/main/binary-amd64/by-hash/SHA256/" + old.SHA256, Size: old.Size, SHA256: old.SHA256})
	m.Sort()
	refused(t, a.forge(t, &m), 422, api.CodeInvalidRelease, "by-hash/SHA256/"+old.SHA256+" is not listed in the signed Release of suite stable")
	a.stillV2(t)
}

// TestAttackStoreTampering: with the store's credentials alone, the attacker replaces
// the active release's .deb with other bytes of the same size and its Packages.gz with
// endless data. The edge (restarted, so nothing is cached) answers 502 for both, to apt
// and to a plain GET, and keeps neither: once the store holds the objects again, the
// signed bytes are served.
func TestAttackStoreTampering(t *testing.T) {
	a := newVictim(t)
	pk, signed := a.signedDeb(t, "hello-victim")
	objPath := func(sum string) string { return filepath.Join(a.c.store, filepath.FromSlash(store.ObjectPath(sum))) }
	write := func(sum string, data []byte) {
		t.Helper()
		if err := os.WriteFile(objPath(sum), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	indexes := map[string][]byte{} // the Packages indexes' objects, as signed
	for _, f := range a.v2.Files {
		if strings.HasPrefix(f.Path, "dists/stable/main/binary-amd64/Packages.") {
			data, err := os.ReadFile(objPath(f.SHA256))
			if err != nil {
				t.Fatal(err)
			}
			indexes[f.SHA256] = data
		}
	}
	a.c.edged.stop()
	write(pk.SHA256, append([]byte("X"), signed[1:]...)) // the same size, other bytes
	for sum := range indexes {
		write(sum, bytes.Repeat([]byte("endless data "), 1<<20)) // 13 MiB for an index of a few hundred bytes
	}
	if err := os.RemoveAll(filepath.Join(a.c.edgeState, "objects")); err != nil {
		t.Fatal(err)
	}
	// Objects over 1 KiB are served from the disk cache, as large pool files are.
	cfg := filepath.Join(a.c.work, "edged.toml")
	if err := os.WriteFile(cfg, []byte("controld = \"http://"+a.c.controldAddr+"\"\nstream_threshold = \"1KiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.c.edgedArgs = []string{"--config-file", cfg}
	a.c.startEdged(t)
	paths := []string{"/" + pk.Path}
	for _, f := range a.v2.Files {
		if indexes[f.SHA256] != nil {
			paths = append(paths, "/"+f.Path)
		}
	}
	for _, p := range paths {
		if _, body := a.c.mustGet(t, attackHost, p, 502); len(body) > 100 {
			t.Errorf("GET %s: the body carries the store's bytes: %.60q", p, body)
		}
	}
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{a.p.source()}, Proxy: "http://" + a.c.edge})
	out, _ := apt.Cmd("update").CombinedOutput()
	if !strings.Contains(string(out), "502") {
		t.Errorf("apt-get update with the index damaged in the store:\n%s\nwant the 502 reported", out)
	}
	write(pk.SHA256, signed)
	for sum, data := range indexes {
		write(sum, data)
	}
	a.stillV2(t)
	files := a.apt(t).Download(t, "hello-victim")
	if got, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(got, signed) {
		t.Fatalf("apt-get download after the store was repaired: %d bytes, %v", len(got), err)
	}
}

// TestAttackFreeze: armor cannot stop a compromised edge or mirror from serving the
// last release it had for ever; Valid-Until bounds how long apt believes it. With
// valid_for set, apt refuses the repository as expired once that time has passed
// without a newer release.
func TestAttackFreeze(t *testing.T) {
	a := newVictim(t, func(p *project) {
		cfg := filepath.Join(p.dir, "armor.toml")
		data, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.Replace(string(data), "[suite.inputs]", "valid_for = \"40s\"\n\n[suite.inputs]", 1))
		if err := os.WriteFile(cfg, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	apt := a.apt(t)
	if got := apt.Policy(t, "hello-victim"); got != "2.0" {
		t.Fatalf("apt candidate %q, want 2.0", got)
	}
	time.Sleep(42 * time.Second) // the frozen repository outlives its Valid-Until
	out, _ := apt.Cmd("update").CombinedOutput()
	if !strings.Contains(string(out), "is expired") {
		t.Errorf("apt-get update of a repository past its Valid-Until:\n%s\nwant it refused as expired", out)
	}
}

// TestAttackCompromisedEdge: what a server in the edge's place can do, armor cannot
// stop: it can send anything. apt still refuses what the key did not sign (a .deb of
// other bytes, an InRelease changed by one byte), but a plain GET takes whatever comes:
// armor verify --pool checks downloads against the signed indexes.
func TestAttackCompromisedEdge(t *testing.T) {
	a := newVictim(t)
	pk, signed := a.signedDeb(t, "hello-victim")
	tamper := map[string][]byte{"/" + pk.Path: append([]byte("X"), signed[1:]...)}
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := tamper[r.URL.Path]; ok {
			w.Write(b)
			return
		}
		http.ServeFile(w, r, filepath.Join(a.p.tree(), filepath.FromSlash(r.URL.Path)))
	}))
	defer rogue.Close()
	src := apttest.Source{URI: rogue.URL + "/", Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: a.p.keyring()}
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{src}})
	apt.Update(t)
	dl := apt.Cmd("download", "hello-victim")
	dl.Dir = t.TempDir() // apt-get download writes, and keeps a mismatched file as .FAILED, in its working directory
	out, err := dl.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Hash Sum mismatch") {
		t.Errorf("apt-get download of a tampered .deb: %v\n%s\nwant a hash sum mismatch", err, out)
	}
	if out, err := armorErr(a.p.dir, nil, "verify", rogue.URL+"/", "--suite", "stable", "--keyring", a.p.keyring(), "--pool"); err == nil ||
		!strings.Contains(out, pk.Path) {
		t.Errorf("armor verify --pool of the rogue server: %v\n%s\nwant %s reported", err, out, pk.Path)
	}
	in, err := os.ReadFile(filepath.Join(a.p.tree(), "dists", "stable", "InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	tamper["/dists/stable/InRelease"] = bytes.Replace(in, []byte("Suite: stable"), []byte("Suite: stablE"), 1)
	apt2 := apttest.New(t, apttest.Options{Sources: []apttest.Source{src}})
	if out, err := apt2.Cmd("update").CombinedOutput(); !strings.Contains(string(out), "not signed") && !strings.Contains(string(out), "BADSIG") &&
		!strings.Contains(string(out), "invalid") {
		t.Errorf("apt-get update of a tampered InRelease: %v\n%s\nwant the signature refused", err, out)
	}
}
