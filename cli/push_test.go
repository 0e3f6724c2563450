package cli

// Tests of armor push as a user runs it, against a local directory store and a real S3
// server on loopback (cmd/s3server): refusing a tampered tree, dry runs, the repository's
// lock, and the messages for bad credentials and an endpoint that does not answer. The
// push workflow itself (what an incremental push uploads, resuming a killed push) is
// tested in package publish.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// storeKind makes a fresh, empty store of one kind for a test.
type storeKind struct {
	name string
	// remote returns the rclone remote of a new empty store.
	remote func(t *testing.T) string
}

// storeKinds are the stores every push test runs against: a local directory, and a
// bucket on a real S3 server started for the calling test.
func storeKinds(t *testing.T) []storeKind {
	t.Helper()
	srv := s3test.Start(t)
	var buckets atomic.Int64
	return []storeKind{
		{"local", func(t *testing.T) string { return filepath.Join(t.TempDir(), "store") }},
		{"s3", func(t *testing.T) string {
			return srv.Remote(fmt.Sprintf("bucket%d", buckets.Add(1)), "armor/releases")
		}},
	}
}

// pushProject is a built project and the store it pushes to.
type pushProject struct {
	dir, cfg, remote string
}

func (p pushProject) manifestPath() string { return filepath.Join(p.dir, testManifestName) }
func (p pushProject) tree() string         { return filepath.Join(p.dir, testTreeName) }

// newPushProject writes and builds a project of testPackagesCount packages in two
// architectures, configured to push to remote. It reads no environment variable (the
// signing key is not encrypted), so push tests run in parallel.
func newPushProject(t *testing.T, remote string) pushProject {
	t.Helper()
	p := pushProject{dir: t.TempDir(), remote: remote}
	p.cfg = newProject(t, p.dir, projectOptions{store: remote})
	if _, err := runBuild(context.Background(), p.cfg, buildOptions{}); err != nil {
		t.Fatalf("build: %v", err)
	}
	return p
}

// openStore opens the project's store the way push does, counted.
func (p pushProject) openStore(t *testing.T) *store.Counting {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), p.remote)
	if err != nil {
		t.Fatal(err)
	}
	return store.NewCounting(s)
}

// releaseObjects are the digests a push of the manifest at path must make present: the
// release's objects and the manifest itself.
func releaseObjects(t *testing.T, path string) map[string]int64 {
	t.Helper()
	data := readFileT(t, path)
	m, err := manifest.Parse(data, path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range m.Objects() {
		out[o.SHA256] = o.Size
	}
	sum := sha256.Sum256(data)
	out[hex.EncodeToString(sum[:])] = int64(len(data))
	return out
}

// checkHolds fails unless store holds every object with its size and content.
func checkHolds(t *testing.T, s store.Store, objects map[string]int64) {
	t.Helper()
	ctx := context.Background()
	for sum, size := range objects {
		rc, err := s.Open(ctx, sum, 0, -1)
		if err != nil {
			t.Errorf("store lacks %s: %v", sum, err)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != sum {
			t.Errorf("object %s in the store: %d bytes (want %d), sha256 %x, err %v", sum, n, size, h.Sum(nil), err)
		}
	}
}

// TestPushRefusesTamperedTree: a tree file changed after the build is refused, named, and
// nothing is stored for it.
func TestPushRefusesTamperedTree(t *testing.T) {
	t.Parallel()
	tampers := []struct {
		name   string
		tamper func(data []byte) []byte
		want   string
	}{
		{"same size", func(d []byte) []byte { d = slices.Clone(d); d[len(d)/2] ^= 1; return d }, "no longer has sha256"},
		{"truncated", func(d []byte) []byte { return d[:len(d)-1] }, "bytes, the manifest says"},
		{"grown", func(d []byte) []byte { return append(slices.Clone(d), '\n') }, "bytes, the manifest says"},
	}
	for _, kind := range storeKinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			for _, tc := range tampers {
				t.Run(tc.name, func(t *testing.T) {
					// A fresh store: an object already there is never read from the tree.
					p := newPushProject(t, kind.remote(t))
					m := loadManifest(t, p.manifestPath())
					pkg := m.Packages[len(m.Packages)/2]
					full := filepath.Join(p.tree(), filepath.FromSlash(pkg.Path))
					orig := readFileT(t, full)
					if err := os.WriteFile(full, tc.tamper(orig), 0o644); err != nil {
						t.Fatal(err)
					}
					r := armorFails(t, 1, []string{full, "changed since the build", tc.want}, "-c", p.cfg, "push")
					if strings.Contains(r.stdout, "pushed release") {
						t.Errorf("a failed push printed success:\n%s", r.stdout)
					}
					cas := p.openStore(t)
					if ok, err := cas.Has(context.Background(), pkg.SHA256); ok || err != nil {
						t.Errorf("the store holds the tampered object %s (%v, %v)", pkg.SHA256, ok, err)
					}
					mdata := readFileT(t, p.manifestPath())
					msum := sha256.Sum256(mdata)
					if ok, err := cas.Has(context.Background(), hex.EncodeToString(msum[:])); ok || err != nil {
						t.Errorf("the store holds the manifest of a refused push (%v, %v)", ok, err)
					}
					if state, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml")); len(state) != 0 {
						t.Errorf("a refused push wrote the pushed state %v", state)
					}
					if kind.name == "local" {
						if tmp, _ := os.ReadDir(filepath.Join(p.remote, "tmp")); len(tmp) != 0 {
							t.Errorf("the local store keeps %d temporary uploads", len(tmp))
						}
					}

					// Restored, the tree pushes.
					if err := os.WriteFile(full, orig, 0o644); err != nil {
						t.Fatal(err)
					}
					out := armorOK(t, "-c", p.cfg, "push")
					if !strings.Contains(out, "pushed release") {
						t.Errorf("push of the restored tree: %s", out)
					}
					checkHolds(t, cas, releaseObjects(t, p.manifestPath()))
				})
			}
		})
	}
}

// TestPushDryRunAndNoControld: --dry-run lists what it would upload and uploads nothing;
// a push without controld says the release is stored but not recorded.
func TestPushDryRunAndNoControld(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			p := newPushProject(t, kind.remote(t))
			all := releaseObjects(t, p.manifestPath())
			m := loadManifest(t, p.manifestPath())

			out := armorOK(t, "-c", p.cfg, "push", "--dry-run")
			if !strings.Contains(out, "dry run: "+strconv.Itoa(len(all))+" object(s) would be uploaded") {
				t.Errorf("dry run output:\n%s", out)
			}
			for _, path := range []string{m.Packages[0].Path, "dists/stable/InRelease", testManifestName} {
				if !strings.Contains(out, path) {
					t.Errorf("dry run does not list %s:\n%s", path, out)
				}
			}
			cas := p.openStore(t)
			for sum := range all {
				if ok, err := cas.Has(context.Background(), sum); ok || err != nil {
					t.Errorf("after a dry run the store has %s (%v, %v)", sum, ok, err)
				}
			}
			if state, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml")); len(state) != 0 {
				t.Errorf("a dry run wrote the pushed state %v", state)
			}

			out = armorOK(t, "-c", p.cfg, "push")
			for _, want := range []string{"pushed release " + m.ID[:12], "uploaded " + strconv.Itoa(len(all)), "no controld configured", "not recorded"} {
				if !strings.Contains(out, want) {
					t.Errorf("push output lacks %q:\n%s", want, out)
				}
			}
			checkHolds(t, cas, all)

			out = armorOK(t, "-c", p.cfg, "push", "--dry-run")
			if !strings.Contains(out, "dry run: 0 object(s)") {
				t.Errorf("dry run after the push:\n%s", out)
			}
			out = armorOK(t, "--json", "-c", p.cfg, "push")
			for _, want := range []string{`"uploaded": 0`, `"known": ` + strconv.Itoa(len(all)), `"recorded": false`, `"release": "` + m.ID + `"`} {
				if !strings.Contains(out, want) {
					t.Errorf("push --json lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestPushS3WrongCredentials: a refused secret fails with a message naming the store and
// the cause, and never shows the secret.
func TestPushS3WrongCredentials(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	srv.Remote("bucket", "") // creates the bucket
	const secret = "not-the-SECRET-value"
	p := newPushProject(t, srv.RemoteWith(srv.KeyID, secret, "bucket", "armor"))
	r := armorFails(t, 1, []string{srv.Endpoint, "bucket", "access denied", "credentials"}, "-c", p.cfg, "push")
	if strings.Contains(r.stderr+r.stdout, secret) {
		t.Errorf("the message shows the secret:\n%s", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(srv.Dir, "bucket")); len(entries) != 0 {
		t.Errorf("a refused push stored %d entries", len(entries))
	}
}

// TestPushUnansweringEndpoint: an S3 endpoint that accepts connections and never answers
// makes push fail within a bounded time, naming the store.
func TestPushUnansweringEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	endpoint := "http://" + ln.Addr().String()
	p := newPushProject(t, s3test.EndpointRemote(endpoint, "key", "secret", "bucket", ""))

	const bound = 75 * time.Second
	type outcome struct {
		r       result
		elapsed time.Duration
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		r := armor(t, "-c", p.cfg, "push")
		done <- outcome{r, time.Since(start)}
	}()
	select {
	case o := <-done:
		t.Logf("push to an unanswering endpoint failed after %v: %s", o.elapsed.Round(time.Second), o.r.stderr)
		if o.r.code != 1 {
			t.Fatalf("want exit 1, got %s", o.r)
		}
		for _, want := range []string{endpoint, "no answer within"} {
			if !strings.Contains(o.r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, o.r.stderr)
			}
		}
	case <-time.After(bound):
		t.Fatalf("push to an endpoint that never answers did not return within %v", bound)
	}
}

// TestPushWithoutStore: no [store] is a clear error naming armor.toml.
func TestPushWithoutStore(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, "")
	armorFails(t, 1, []string{p.cfg, "no [store] configured"}, "-c", p.cfg, "push")
}

// TestBuildAndPushLock: a build does not start while another build or a push holds the
// repository's lock, nor a push during a build; each names the lock file and leaves the
// manifest and the tree as they were. Pushes share the lock.
func TestBuildAndPushLock(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, filepath.Join(t.TempDir(), "store"))
	cfg, err := config.Load(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cache := cfg.Resolve(cfg.Output.Cache)
	lock := filepath.Join(cache, "lock")
	inRelease := filepath.Join(p.tree(), "dists", "stable", "InRelease")
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	manifestBefore, inReleaseBefore := read(p.manifestPath()), read(inRelease)

	// As while another build runs: neither a build nor a push starts.
	unlock, err := lockfile.Lock(cache, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{lock, "another armor build or push"}
	armorFails(t, 1, want, "-c", p.cfg, "build", "--resign")
	armorFails(t, 1, want, "-c", p.cfg, "push")
	unlock()

	// As while a push runs: another push may run, a build may not.
	unlock, err = lockfile.Lock(cache, false)
	if err != nil {
		t.Fatal(err)
	}
	armorFails(t, 1, want, "-c", p.cfg, "build", "--resign")
	if _, err := runPush(context.Background(), p.cfg, pushOptions{Store: p.openStore(t), Jobs: 2}); err != nil {
		t.Errorf("push beside another push: %v", err)
	}
	unlock()

	if read(p.manifestPath()) != manifestBefore || read(inRelease) != inReleaseBefore {
		t.Error("a build refused for the lock changed the manifest or InRelease")
	}
	// Released: a build runs.
	res, err := runBuild(context.Background(), p.cfg, buildOptions{Resign: true})
	if err != nil {
		t.Fatalf("build after the lock was released: %v", err)
	}
	if res.Stats.SuitesSigned == 0 {
		t.Errorf("the build after the lock was released signed nothing: %+v", res.Stats)
	}
}
