package edged

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// errStoreUnreachable is what testStore answers while down.
var errStoreUnreachable = errors.New("test store: connection refused")

// testStore wraps a store.Store: it counts Opens per object, can be made slow or
// unreachable, and records the ranges asked.
type testStore struct {
	store.Store
	down    atomic.Bool
	gone    atomic.Bool  // answers as a store that moved: no object is found
	delay   atomic.Int64 // nanoseconds added to each Open
	damaged sync.Map     // sum -> []byte served instead of the object
	mu      sync.Mutex
	opens   map[string]int
	stats   int
	asked   []string // "sum offset length" of each Open
}

func newTestStore() *testStore {
	return &testStore{Store: store.NewMemory(), opens: map[string]int{}}
}

func (s *testStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.opens[sum]++
	s.asked = append(s.asked, fmt.Sprintf("%s %d %d", sum, offset, length))
	s.mu.Unlock()
	if d := s.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if s.down.Load() {
		return nil, fmt.Errorf("open %s: %w", sum, errStoreUnreachable)
	}
	if s.gone.Load() {
		return nil, fmt.Errorf("open %s: %w", sum, store.ErrNotFound)
	}
	if v, ok := s.damaged.Load(sum); ok {
		return io.NopCloser(bytes.NewReader(v.([]byte))), nil
	}
	return s.Store.Open(ctx, sum, offset, length)
}

func (s *testStore) Stat(ctx context.Context, sum string) (store.Info, error) {
	s.mu.Lock()
	s.stats++
	s.mu.Unlock()
	if s.down.Load() {
		return store.Info{}, fmt.Errorf("stat %s: %w", sum, errStoreUnreachable)
	}
	if s.gone.Load() {
		return store.Info{}, fmt.Errorf("stat %s: %w", sum, store.ErrNotFound)
	}
	if v, ok := s.damaged.Load(sum); ok {
		return store.Info{SHA256: sum, Size: int64(len(v.([]byte)))}, nil
	}
	return s.Store.Stat(ctx, sum)
}

func (s *testStore) Has(ctx context.Context, sum string) (bool, error) {
	if s.down.Load() {
		return false, fmt.Errorf("has %s: %w", sum, errStoreUnreachable)
	}
	if s.gone.Load() {
		return false, nil
	}
	return s.Store.Has(ctx, sum)
}

func (s *testStore) statCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *testStore) openCount(sum string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens[sum]
}

func (s *testStore) put(t testing.TB, data []byte) string {
	t.Helper()
	sum := sha(data)
	if _, err := s.Store.Put(context.Background(), sum, int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatalf("put object: %v", err)
	}
	return sum
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rel is a release made for a test: its manifest, the digest of the manifest object,
// and the content of every path.
type rel struct {
	m     *manifest.Manifest
	sum   string
	files map[string][]byte
}

// object returns the content served at p.
func (r *rel) object(p string) []byte { return r.files[p] }

// makeRelease stores every object of a tree and its sealed manifest. Paths under pool/
// become packages; the others generated files.
func makeRelease(t testing.TB, s *testStore, repo, date string, files map[string][]byte) *rel {
	t.Helper()
	m := &manifest.Manifest{Schema: manifest.SchemaVersion, Repository: repo, Date: date}
	for p, data := range files {
		sum := s.put(t, data)
		if strings.HasPrefix(p, "pool/") {
			name := strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".deb")
			m.Packages = append(m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name,
				Version: "1", Architecture: "amd64", Path: p, Size: int64(len(data)), SHA256: sum})
			continue
		}
		m.Files = append(m.Files, manifest.File{Path: p, Size: int64(len(data)), SHA256: sum})
	}
	if err := manifest.Seal(m); err != nil {
		t.Fatalf("seal manifest: %v", err)
	}
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatalf("marshal manifest: %v", err)
	}
	return &rel{m: m, sum: s.put(t, b), files: files}
}

// aptTree is a small repository generation: InRelease names Packages and Packages.gz by
// their by-hash paths, so a reader can check it got matching bytes.
func aptTree(repo string, gen int) map[string][]byte {
	pk := []byte(fmt.Sprintf("Package: hello\nVersion: %d\nRepository: %s\n\n", gen, repo))
	gz := []byte(fmt.Sprintf("\x1f\x8bgzip of %s generation %d", repo, gen))
	byHash := "dists/stable/main/binary-amd64/by-hash/SHA256/"
	release := fmt.Sprintf("Origin: %s\nSuite: stable\nSHA256:\n %s %d main/binary-amd64/Packages\n %s %d main/binary-amd64/Packages.gz\n",
		repo, sha(pk), len(pk), sha(gz), len(gz))
	return map[string][]byte{
		"dists/stable/Release":                                   []byte(release),
		"dists/stable/InRelease":                                 []byte("-----BEGIN PGP SIGNED MESSAGE-----\n" + release),
		"dists/stable/Release.gpg":                               []byte("sig of " + release),
		"dists/stable/main/binary-amd64/Packages":                pk,
		"dists/stable/main/binary-amd64/Packages.gz":             gz,
		byHash + sha(pk):                                         pk,
		byHash + sha(gz):                                         gz,
		fmt.Sprintf("pool/main/h/hello/hello_%d_amd64.deb", gen): []byte(fmt.Sprintf("!<arch>\ndebian-binary %s %d", repo, gen)),
		"dists/stable/main/binary-amd64/Release":                 []byte("Archive: stable\n"),
	}
}

// fakeControld serves the routes feed on 127.0.0.1, its long poll read with the same
// controld/api functions controld uses.
type fakeControld struct {
	token   string
	srv     *httptest.Server
	mu      sync.Mutex
	feed    api.Routes
	changed chan struct{}
	held    chan struct{} // non-nil: routes requests wait until it is closed
	polls   atomic.Int64
}

// hold makes routes requests wait, unanswered, until the returned release is called.
func (c *fakeControld) hold() (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := make(chan struct{})
	c.held = held
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.held = nil
			c.mu.Unlock()
			close(held)
		})
	}
}

func newFakeControld(t testing.TB) *fakeControld {
	t.Helper()
	c := &fakeControld{token: "edge-secret", changed: make(chan struct{}), feed: api.Routes{Version: 1, GeneratedAt: time.Now().UTC()}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.stop)
	return c
}

func (c *fakeControld) stop() {
	c.srv.CloseClientConnections()
	c.srv.Close()
}

func (c *fakeControld) url() string { return c.srv.URL }

// set publishes new sites under the next version.
func (c *fakeControld) set(sites ...api.Site) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed = api.Routes{Version: c.feed.Version + 1, GeneratedAt: time.Now().UTC(), Sites: sites}
	close(c.changed)
	c.changed = make(chan struct{})
	return c.feed.Version
}

func (c *fakeControld) serve(w http.ResponseWriter, r *http.Request) {
	c.polls.Add(1)
	if r.URL.Path != "/v1/routes" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+c.token {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	wait, err := api.RoutesWait(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		feed, changed := c.feed, c.changed
		c.mu.Unlock()
		if !api.RoutesUnchanged(r.Header.Get("If-None-Match"), feed.Version) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", api.RoutesETag(feed.Version))
			_ = json.NewEncoder(w).Encode(feed)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// feedSite makes the feed entry of a repository with an active release (activated a
// minute ago) and retained ones.
func feedSite(repo string, hosts []string, active *rel, retained ...*rel) api.Site {
	s := api.Site{Repository: repo, Hostnames: hosts,
		Active: &api.RouteActive{ID: active.m.ID, Manifest: active.sum, ActivatedAt: time.Now().Add(-time.Minute).UTC()}}
	for _, r := range retained {
		s.Retained = append(s.Retained, api.Retained{ID: r.m.ID, Manifest: r.sum, Until: time.Now().Add(48 * time.Hour).UTC()})
	}
	return s
}

// testEdge is an Edge serving on 127.0.0.1 with Sync running.
type testEdge struct {
	*Edge
	addr, admin string
	cancel      context.CancelFunc
	done        chan struct{}
}

func testConfig(t testing.TB, c *fakeControld) Config {
	t.Helper()
	return Config{
		Controld:        c.url(),
		Token:           c.token,
		StateDir:        t.TempDir(),
		CacheSize:       64 * MiB,
		StreamThreshold: 1 * MiB,
		Poll:            PollConfig{Wait: duration.Duration(10 * time.Second), BackoffMin: duration.Duration(20 * time.Millisecond), BackoffMax: duration.Duration(200 * time.Millisecond)},
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startEdge creates an edge and runs Serve, ServeAdmin and Sync until the test ends.
func startEdge(t testing.TB, cfg Config, cas store.Store) *testEdge {
	t.Helper()
	e, err := New(cfg, cas, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	te := &testEdge{Edge: e, addr: ln.Addr().String(), admin: aln.Addr().String(), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, run := range []func() error{
		func() error { return e.Serve(ctx, ln) },
		func() error { return e.ServeAdmin(ctx, aln) },
		func() error { return e.Sync(ctx) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(); err != nil {
				t.Errorf("edge: %v", err)
			}
		}()
	}
	go func() { wg.Wait(); close(te.done) }()
	t.Cleanup(te.stop)
	return te
}

// stop shuts the edge down and waits for it.
func (te *testEdge) stop() {
	te.cancel()
	<-te.done
	te.Close()
}

// waitVersion waits until the edge serves routes version v.
func (te *testEdge) waitVersion(t testing.TB, v uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for te.Version() < v {
		if time.Now().After(deadline) {
			t.Fatalf("edge serves routes version %d; want %d within 10s", te.Version(), v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var testClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// get sends method host path with extra headers and returns the response and body.
func get(t *testing.T, addr, method, host, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s%s: read body: %v", method, host, path, err)
	}
	return resp, body
}

// raw sends a request exactly as written and reads one response.
func raw(t *testing.T, addr, request string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.Fields(request)[0]})
	if err != nil {
		t.Fatalf("read response to %q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// wantStatus fails unless resp has the status.
func wantStatus(t *testing.T, what string, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d (body %.80q); want %d", what, resp.StatusCode, body, status)
	}
}

// getStatus is a GET that reports failures as status 0.
func getStatus(addr, host, path string) (int, []byte) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return 0, nil
	}
	req.Host = host
	resp, err := testClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, body
}
