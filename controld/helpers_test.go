package controld_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	genindex "github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// clock is an injectable, settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// loadKey reads a fixed test key from testdata/keys.
func loadKey(t testing.TB, name string) *sign.Key {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "keys", name+".sec.asc"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := sign.ReadSecretKey(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func publicKey(t testing.TB, k *sign.Key) string {
	t.Helper()
	var b bytes.Buffer
	if err := k.WritePublicArmored(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fixture is a controld over real HTTP on 127.0.0.1 with an in-memory object store, a
// bbolt state in a temp dir, a fake clock and an admin token.
type fixture struct {
	t      *testing.T
	store  *store.Memory
	st     *bolt.Store
	srv    *controld.Server
	http   *httptest.Server
	clock  *clock
	admin  *client.Client
	key    *sign.Key // registered for repository "demo"
	other  *sign.Key // never registered
	secret string    // the admin token
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, controld.Config{}, nil)
}

// newFixtureWith is newFixture with a config (its clock is the fixture's) and, unless
// nil, a wrapper of the object store the server uses.
func newFixtureWith(t *testing.T, cfg controld.Config, wrap func(store.Store) store.Store) *fixture {
	t.Helper()
	dir := t.TempDir()
	secret, err := controld.CreateToken(dir, "root", []string{"*"}, []string{"admin", "push", "activate", "read"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, controld.DBFile), &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	f := &fixture{t: t, store: store.NewMemoryClock(c.Now), st: st, clock: c, secret: secret,
		key: loadKey(t, "eddsa"), other: loadKey(t, "rsa")}
	cfg.Now = f.clock.Now
	var cas store.Store = f.store
	if wrap != nil {
		cas = wrap(cas)
	}
	f.srv, err = controld.NewServer(cfg, cas, st)
	if err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		f.srv.Close()
		f.http.Close()
		if err := st.Check(context.Background()); err != nil {
			t.Errorf("state check: %v", err)
		}
		st.Close()
	})
	f.admin = f.client(secret)
	return f
}

func (f *fixture) client(token string) *client.Client {
	return client.New(f.http.URL, token, f.http.Client())
}

// token creates a token through the API and returns a client using it.
func (f *fixture) token(name string, repos []string, actions ...string) *client.Client {
	f.t.Helper()
	out, err := f.admin.CreateToken(context.Background(), name, repos, actions)
	if err != nil {
		f.t.Fatalf("create token %s: %v", name, err)
	}
	return f.client(out.Secret)
}

// repo creates a repository with the fixture's key registered.
func (f *fixture) repo(name string, hosts ...string) {
	f.t.Helper()
	_, err := f.admin.CreateRepo(context.Background(), api.CreateRepoRequest{
		Name: name, Hostnames: hosts, Keys: []string{publicKey(f.t, f.key)},
	})
	if err != nil {
		f.t.Fatalf("create repository %s: %v", name, err)
	}
}

// tree is a tiny signed repository: packages in stable/main (amd64), their Packages
// index (also by-hash), Release, InRelease and Release.gpg.
type tree struct {
	files map[string][]byte
	m     *manifest.Manifest
	key   *sign.Key
	date  string // the Release's Date
	// gz publishes the index as armor build does: Packages.gz and Packages.xz of chunked
	// gzip members (gen/index) with their by-hash copies; Release also lists the
	// uncompressed Packages, which is not served.
	gz bool
	// fields, when set, gives more fields of a package's stanza, as real indexes have
	// (Maintainer, Depends, Description...), inserted before Filename.
	fields func(p *manifest.Package) string
	// chunks, when set, keeps compressed chunks of the index between builds.
	chunks *genindex.Cache
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// set puts a file in the tree and in the manifest.
func (tr *tree) set(path string, data []byte) {
	tr.files[path] = data
	for i := range tr.m.Files {
		if tr.m.Files[i].Path == path {
			tr.m.Files[i] = manifest.File{Path: path, Size: int64(len(data)), SHA256: digest(data)}
			return
		}
	}
	tr.m.Files = append(tr.m.Files, manifest.File{Path: path, Size: int64(len(data)), SHA256: digest(data)})
}

// unset removes a file from the tree and the manifest.
func (tr *tree) unset(path string) {
	delete(tr.files, path)
	tr.m.Files = slices.DeleteFunc(tr.m.Files, func(f manifest.File) bool { return f.Path == path })
}

// treeDates holds the Release date of each tree published, by release id: a tree built
// on one is dated a second later, as armor build dates a release after its parent.
var treeDates sync.Map

// newTree builds a release of repo whose package has the given version, signed by key.
// Its Release is dated a second after its parent's (2026-11-22 08:00 for a first
// release).
func newTree(t testing.TB, repo, parent, version string, key *sign.Key) *tree {
	t.Helper()
	date := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	if d, ok := treeDates.Load(parent); ok {
		date = d.(time.Time).Add(time.Second)
	}
	tr := &tree{files: map[string][]byte{}, key: key, date: release.FormatDate(date), m: &manifest.Manifest{
		Schema: manifest.SchemaVersion, Repository: repo, Parent: parent, Date: date.Format(time.RFC3339),
	}}
	tr.add("hello", version, []byte("not really a deb: hello "+version+"\n"))
	tr.index(t)
	return tr
}

// add puts a package of stable/main (amd64) in the tree and the manifest; index then
// lists it.
func (tr *tree) add(name, version string, deb []byte) {
	pool := "pool/main/" + name[:1] + "/" + name + "/" + name + "_" + version + "_amd64.deb"
	tr.files[pool] = deb
	tr.m.Packages = append(tr.m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name, Version: version,
		Architecture: "amd64", Path: pool, Size: int64(len(deb)), SHA256: digest(deb)})
	tr.m.Sort()
}

// index writes the Packages index of the manifest's packages (and its by-hash copy, in
// place of the old one), the Release listing it, and signs it with the tree's key.
func (tr *tree) index(t testing.TB) {
	t.Helper()
	var stanzas [][]byte
	for i := range tr.m.Packages {
		p := &tr.m.Packages[i]
		more := ""
		if tr.fields != nil {
			more = tr.fields(p)
		}
		stanzas = append(stanzas, fmt.Appendf(nil, "Package: %s\nVersion: %s\nArchitecture: %s\n%sFilename: %s\nSize: %d\nSHA256: %s\n",
			p.Name, p.Version, p.Architecture, more, p.Path, p.Size, p.SHA256))
	}
	for _, f := range slices.Clone(tr.m.Files) {
		if strings.HasPrefix(f.Path, "dists/stable/main/") {
			tr.unset(f.Path)
		}
	}
	dir := "dists/stable/main/binary-amd64/"
	var sums string
	if tr.gz {
		b, err := genindex.Build(stanzas, tr.chunks, "test")
		if err != nil {
			t.Fatal(err)
		}
		for i, form := range [][]byte{b.Plain, b.Gzip, b.Xz} {
			name := "Packages" + []string{"", ".gz", ".xz"}[i]
			sums += fmt.Sprintf(" %s %16d main/binary-amd64/%s\n", digest(form), len(form), name)
			if i > 0 {
				tr.set(dir+name, form)
				tr.set(dir+"by-hash/SHA256/"+digest(form), form)
			}
		}
	} else {
		packages := bytes.Join(stanzas, []byte("\n"))
		if len(packages) > 0 {
			packages = append(packages, '\n')
		}
		tr.set(dir+"Packages", packages)
		tr.set(dir+"by-hash/SHA256/"+digest(packages), packages)
		sums = fmt.Sprintf(" %s %16d main/binary-amd64/Packages\n", digest(packages), len(packages))
	}
	tr.set("dists/stable/Release", fmt.Appendf(nil, "Origin: test\nSuite: stable\nCodename: stable\nDate: %s\n"+
		"Acquire-By-Hash: yes\nComponents: main\nArchitectures: amd64\nSHA256:\n%s", tr.date, sums))
	tr.sign(t, tr.key)
}

// sign (re)writes InRelease and Release.gpg for the tree's Release.
func (tr *tree) sign(t testing.TB, key *sign.Key) {
	t.Helper()
	release := tr.files["dists/stable/Release"]
	in, err := key.Clearsign(release, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := key.DetachSign(release, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	tr.set("dists/stable/InRelease", in)
	tr.set("dists/stable/Release.gpg", sig)
}

// nextSecond dates tr a second after its Release's date, as armor build dates a release
// built on it; index then signs that date.
func (tr *tree) nextSecond(t testing.TB) {
	t.Helper()
	date, err := release.ParseDate(tr.date)
	if err != nil {
		t.Fatal(err)
	}
	date = date.Add(time.Second)
	tr.date, tr.m.Date = release.FormatDate(date), date.Format(time.RFC3339)
}

// publish seals the manifest, uploads every object and the manifest, and returns the
// manifest's object digest.
func (tr *tree) publish(t testing.TB, cas store.Store) string {
	t.Helper()
	if err := manifest.Seal(tr.m); err != nil {
		t.Fatal(err)
	}
	date, err := release.ParseDate(tr.date)
	if err != nil {
		t.Fatal(err)
	}
	treeDates.Store(tr.m.ID, date)
	data, err := manifest.Marshal(tr.m)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range tr.files {
		put(t, cas, b)
	}
	return put(t, cas, data)
}

func put(t testing.TB, cas store.Store, b []byte) string {
	t.Helper()
	sum := digest(b)
	if _, err := cas.Put(context.Background(), sum, int64(len(b)), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return sum
}

// release builds and publishes a release of repo and returns its id and manifest digest.
func (f *fixture) release(repo, parent, version string) (id, sum string) {
	f.t.Helper()
	tr := newTree(f.t, repo, parent, version, f.key)
	sum = tr.publish(f.t, f.store)
	return tr.m.ID, sum
}

// wantStatus checks that err is an *APIError with the given status.
func wantStatus(t *testing.T, err error, status int) *client.APIError {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error = %v, want an API error with status %d", err, status)
	}
	if apiErr.Status != status {
		t.Fatalf("status = %d (%s), want %d", apiErr.Status, apiErr.Message, status)
	}
	return apiErr
}

// snapshot captures everything observable of the state, to show a refused request
// changed nothing.
func (f *fixture) snapshot() string {
	f.t.Helper()
	ctx := context.Background()
	var b bytes.Buffer
	snap, err := f.st.Snapshot(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	fmt.Fprintf(&b, "version %d\n", snap.Version)
	for _, r := range snap.Repositories {
		for i := range r.Keys {
			r.Keys[i].Armored = "..."
		}
		rels, _ := f.st.Releases(ctx, r.Name)
		hist, _ := f.st.History(ctx, r.Name)
		for _, v := range []any{r, rels, hist} {
			j, _ := json.Marshal(v)
			fmt.Fprintf(&b, "%s\n", j)
		}
	}
	toks, _ := f.st.Tokens(ctx)
	j, _ := json.Marshal(toks)
	fmt.Fprintf(&b, "%s\n", j)
	return b.String()
}

// rawRequest sends a request with a raw body and returns the status and body.
func (f *fixture) rawRequest(method, path, token string, body []byte) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.http.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

var _ state.Store = (*bolt.Store)(nil)
