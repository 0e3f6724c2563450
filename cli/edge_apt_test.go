package cli_test

// Integration tests of edged as apt meets it: the real armor binary builds and pushes
// trees into a store, a controld and an edged run as separate processes on loopback, and
// the real apt-get talks to the edge as its HTTP proxy. They cover two repositories
// behind one edge, flips of the active release under load, the edge's behaviour with
// controld and the store gone, and (reported, not asserted) how long after `armor push`
// returns the edge serves the new InRelease.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// proc is an armor daemon that a test may kill (SIGKILL) before the test ends; unlike
// daemon(), it hands the test a handle for that. A restarted daemon is a new proc.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProc starts armor with args, its output appended to logPath. The process is
// stopped (SIGINT, then SIGKILL after 10 s) when the test ends, if still running.
func startProc(t *testing.T, env []string, logPath string, args ...string) *proc {
	t.Helper()
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(armorBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s (pid %d) log:\n%s", filepath.Base(logPath), cmd.Process.Pid, data)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill pid %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d still running 10s after SIGKILL", p.cmd.Process.Pid)
	}
}

// stop asks the process to end (SIGINT) and kills it if it has not within 10 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// cluster is one store, one controld and one edged, on loopback, with an admin token
// for the armor commands and a read-only token for the edge.
type cluster struct {
	work, store, data, edgeState  string
	controldAddr, edge, edgeAdmin string
	admin, edgeToken              string
	controld, edged               *proc
	http                          *http.Client // talks to the edge directly, never through a proxy
	controldStarts, edgedStarts   int
	edgedArgs                     []string // more arguments of edged
}

// newCluster starts a cluster whose store is a local directory (work/store).
func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterWith(t, "")
}

// newClusterWith starts a cluster on the store remote (an rclone remote), or on a local
// directory when store is "".
func newClusterWith(t *testing.T, cas string) *cluster {
	t.Helper()
	work := t.TempDir()
	if cas == "" {
		cas = filepath.Join(work, "store")
	}
	c := &cluster{
		work: work, store: cas, data: filepath.Join(work, "controld"),
		edgeState:    filepath.Join(work, "edged"),
		controldAddr: freeAddr(t), edge: freeAddr(t), edgeAdmin: freeAddr(t),
		http: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}, Timeout: 60 * time.Second},
	}
	t.Cleanup(c.http.CloseIdleConnections)
	c.admin = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", c.data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	c.edgeToken = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", c.data, "edge",
		"--for", "*", "--action", "read"))
	c.startControld(t)
	c.startEdged(t)
	return c
}

func (c *cluster) startControld(t *testing.T) {
	t.Helper()
	c.controldStarts++
	c.controld = startProc(t, nil, filepath.Join(c.work, fmt.Sprintf("controld-%d.log", c.controldStarts)),
		"controld", "--listen", c.controldAddr, "--data-dir", c.data, "--store", c.store)
	waitHTTP(t, "http://"+c.controldAddr+"/v1/healthz")
}

// startEdged starts edged on the cluster's addresses; it waits until the edge has routes
// (from controld or from its state directory).
func (c *cluster) startEdged(t *testing.T) {
	t.Helper()
	c.edgedStarts++
	c.edged = startProc(t, []string{"ARMOR_EDGE_TOKEN=" + c.edgeToken},
		filepath.Join(c.work, fmt.Sprintf("edged-%d.log", c.edgedStarts)),
		append([]string{"edged", "--listen", c.edge, "--admin-listen", c.edgeAdmin, "--controld", "http://" + c.controldAddr,
			"--store", c.store, "--state-dir", c.edgeState}, c.edgedArgs...)...)
	waitHTTP(t, "http://"+c.edgeAdmin+"/healthz")
}

// env is the environment of armor commands that talk to controld.
func (c *cluster) env() []string { return []string{"ARMOR_TOKEN=" + c.admin} }

// get asks the edge for path under host, and returns the response with its whole body.
func (c *cluster) get(host, path string) (*http.Response, []byte, error) {
	req, err := http.NewRequest("GET", "http://"+c.edge+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Host = host
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// mustGet is get that fails the test unless the answer is want.
func (c *cluster) mustGet(t *testing.T, host, path string, want int) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := c.get(host, path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s%s: status %d, want %d; body %q", host, path, resp.StatusCode, want, body)
	}
	return resp, body
}

// checkETag returns an error unless body's SHA-256 is the response's ETag.
func checkETag(resp *http.Response, body []byte) error {
	sum := sha256.Sum256(body)
	got := hex.EncodeToString(sum[:])
	if etag := strings.Trim(resp.Header.Get("ETag"), `"`); etag != got {
		return fmt.Errorf("%s: body sha256 %s, ETag %q (%d bytes)", resp.Request.URL.Path, got, etag, len(body))
	}
	return nil
}

// project is one armor project (armor.toml, key, debs/, public/, manifest.toml).
type project struct {
	dir, name, host string
}

// newProject runs armor init for a repository served under host, pushing to the
// cluster's store and controld, and creates the repository in controld.
func (c *cluster) newProject(t *testing.T, name, host string) *project {
	t.Helper()
	p := &project{dir: filepath.Join(c.work, name), name: name, host: host}
	armor(t, c.work, nil, "init", "--dir", p.dir, "--name", name, "--hostname", host,
		"--key-algo", "eddsa", "--store", c.store, "--controld", "http://"+c.controldAddr)
	armor(t, p.dir, c.env(), "repos", "create")
	return p
}

func (p *project) keyring() string {
	return filepath.Join(p.dir, "keys", p.name+"-archive-keyring.gpg")
}

func (p *project) tree() string { return filepath.Join(p.dir, "public") }

func (p *project) source() apttest.Source {
	return apttest.Source{URI: "http://" + p.host + "/", Suites: []string{"stable"},
		Components: []string{"main"}, SignedBy: p.keyring()}
}

// pkg is one synthetic package.
type pkg struct{ name, version, depends string }

// setDebs makes the project's debs/ hold exactly pkgs, and its suite mirror debs/ (sync),
// so that the next build publishes exactly them.
func (p *project) setDebs(t *testing.T, pkgs []pkg) {
	t.Helper()
	cfg := filepath.Join(p.dir, "armor.toml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\nsync = true\n") {
		data = []byte(strings.Replace(string(data), "[suite.inputs]", "sync = true\nmax_removals = \"100%\"\n\n[suite.inputs]", 1))
		if err := os.WriteFile(cfg, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	debs := filepath.Join(p.dir, "debs")
	old, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range pkgs {
		if _, err := synth.WriteOne(debs, k.name, k.version, "amd64", k.depends); err != nil {
			t.Fatal(err)
		}
	}
}

// build runs armor build with env and returns the release id.
func (p *project) build(t *testing.T, env ...string) string {
	t.Helper()
	var res struct {
		Release string `json:"release"`
	}
	out := armor(t, p.dir, env, "build", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Release) != 64 {
		t.Fatalf("armor build --json: release %q, %v\n%s", res.Release, err, out)
	}
	return res.Release
}

func (p *project) push(t *testing.T, c *cluster) {
	t.Helper()
	if out := armor(t, p.dir, c.env(), "push"); !strings.Contains(out, "recorded and activated") {
		t.Fatalf("armor push: %s", out)
	}
}

// inRelease is the local tree's InRelease.
func (p *project) inRelease(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.tree(), "dists", "stable", "InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// poolFiles returns the pool/ paths of the local tree, sorted.
func (p *project) poolFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(p.tree(), "pool"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(p.tree(), path)
		files = append(files, "/"+filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// byHashPackages is the by-hash path of the local tree's main/binary-amd64/Packages.gz.
func (p *project) byHashPackages(t *testing.T) string {
	t.Helper()
	sum, ok := releaseSHA256(p.inRelease(t), "main/binary-amd64/Packages.gz")
	if !ok {
		t.Fatalf("%s: InRelease lists no main/binary-amd64/Packages.gz", p.name)
	}
	return "/dists/stable/main/binary-amd64/by-hash/SHA256/" + sum
}

// updateTrouble returns the lines of apt-get update output that show a problem, as
// apttest.Update judges them for signed sources: W:, E:, Err: and Ign: lines.
func updateTrouble(out string) []string {
	var bad []string
	for _, line := range strings.Split(out, "\n") {
		for _, p := range []string{"W:", "E:", "Err:", "Ign:"} {
			if strings.HasPrefix(line, p) {
				bad = append(bad, line)
			}
		}
	}
	return bad
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestEdgeTwoRepositories: two repositories sharing one store and one controld, served by
// one edge under their own hostnames; apt uses both at once, each signed by its own key,
// and a repository's files are not reachable under the other's hostname.
func TestEdgeTwoRepositories(t *testing.T) {
	c := newCluster(t)
	one := c.newProject(t, "one", "apt.one.test")
	two := c.newProject(t, "two", "apt.two.test")
	one.setDebs(t, []pkg{
		{"one-base", "1.0-1", ""},
		{"one-lib", "2.3-1", "one-base (>= 1.0)"},
		{"one-app", "0.9-2", "one-lib, one-base"},
	})
	two.setDebs(t, []pkg{
		{"two-core", "5.0-1", ""},
		{"two-tool", "5.0-1", "two-core (= 5.0-1)"},
		// Depends across repositories: only a client with both sources can install it.
		{"two-bridge", "1.0-1", "two-tool, one-lib (>= 2.0)"},
	})
	for _, p := range []*project{one, two} {
		p.build(t)
		p.push(t, c)
		waitServed(t, c.edge, p.host, p.tree())
	}

	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{one.source(), two.source()},
		Proxy:   "http://" + c.edge,
	})
	out := apt.Update(t)
	for _, host := range []string{one.host, two.host} {
		if !strings.Contains(out, "http://"+host+" stable InRelease") {
			t.Errorf("apt-get update did not fetch %s's InRelease:\n%s", host, out)
		}
	}
	want := map[string]string{
		"one-base": "1.0-1", "one-lib": "2.3-1", "one-app": "0.9-2",
		"two-core": "5.0-1", "two-tool": "5.0-1", "two-bridge": "1.0-1",
	}
	names := make([]string, 0, len(want))
	for name, v := range want {
		names = append(names, name)
		if got := apt.Policy(t, name); got != v {
			t.Errorf("apt candidate for %s = %q, want %q", name, got, v)
		}
	}
	slices.Sort(names)

	// Every package downloads through the edge with the bytes of the local pool files.
	local := map[string]string{} // base name -> sha256 of the local pool file
	for _, p := range []*project{one, two} {
		for _, f := range p.poolFiles(t) {
			b, err := os.ReadFile(filepath.Join(p.tree(), filepath.FromSlash(f)))
			if err != nil {
				t.Fatal(err)
			}
			local[filepath.Base(f)] = sha256Hex(b)
		}
	}
	files := apt.Download(t, names...)
	if len(files) != len(names) {
		t.Fatalf("apt-get download %v wrote %d files, want %d: %v", names, len(files), len(names), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// apt-get download names files with the epoch's colon escaped; there is none here.
		if want, ok := local[filepath.Base(f)]; !ok || want != sha256Hex(b) {
			t.Errorf("downloaded %s: sha256 %s, local pool file %q", filepath.Base(f), sha256Hex(b), want)
		}
	}

	// Installs resolve dependencies within and across the two repositories.
	cases := []struct {
		name    string
		install []string
		want    []string
	}{
		{"within one", []string{"one-app"}, []string{"Inst one-base", "Inst one-lib", "Inst one-app"}},
		{"within two", []string{"two-tool"}, []string{"Inst two-core", "Inst two-tool"}},
		{"across both", []string{"two-bridge"}, []string{"Inst one-base", "Inst one-lib", "Inst two-core", "Inst two-tool", "Inst two-bridge"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := apt.SimulateInstall(t, tc.install...)
			for _, w := range tc.want {
				if !strings.Contains(sim, w+" (") {
					t.Errorf("apt-get -s install %v lacks %q:\n%s", tc.install, w, sim)
				}
			}
		})
	}

	// Isolation: each hostname serves its own tree and nothing of the other's.
	for _, tc := range []struct {
		name       string
		owner      *project
		other      *project
		ownerPaths []string
	}{
		{"one under two", one, two, append(one.poolFiles(t), one.byHashPackages(t))},
		{"two under one", two, one, append(two.poolFiles(t), two.byHashPackages(t))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range tc.ownerPaths {
				resp, body := c.mustGet(t, tc.owner.host, path, 200)
				if err := checkETag(resp, body); err != nil {
					t.Error(err)
				}
				c.mustGet(t, tc.other.host, path, 404)
			}
			_, body := c.mustGet(t, tc.other.host, "/dists/stable/InRelease", 200)
			if !bytes.Equal(body, tc.other.inRelease(t)) {
				t.Errorf("%s serves an InRelease that is not its own:\n%s", tc.other.host, body)
			}
		})
	}
	c.mustGet(t, "apt.unknown.test", "/dists/stable/InRelease", 404)
}

// flipRelease returns the packages of release k of the flip test: a window of ten
// numbered packages that moves by two each release (two added, two removed), where each
// odd-numbered package depends on the even one before it (always in the same window), and
// flip-ver, upgraded every release.
func flipRelease(k int) []pkg {
	pkgs := []pkg{{"flip-ver", fmt.Sprintf("1.%d-1", k), ""}}
	for i := 2 * k; i < 2*k+10; i++ {
		dep := ""
		if i%2 == 1 {
			dep = fmt.Sprintf("flip-%02d", i-1)
		}
		pkgs = append(pkgs, pkg{fmt.Sprintf("flip-%02d", i), "1.0-1", dep})
	}
	return pkgs
}

// loadStats collects what the clients of the flip test saw.
type loadStats struct {
	mu       sync.Mutex
	problems []string
	updates  atomic.Int64
	fetches  atomic.Int64
	rounds   atomic.Int64
	statuses sync.Map // int -> *atomic.Int64
	// inReleaseGets counts apt-get updates that fetched an InRelease (not a 304 "Hit").
	inReleaseGets atomic.Int64
	// inReleases holds the sha256 of every InRelease the fetchers were served.
	inReleases sync.Map
	// others holds the distinct apt-get update lines that are neither progress nor
	// problems, for the log.
	others []string
}

func (s *loadStats) other(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.others) < 20 && !slices.Contains(s.others, line) {
		s.others = append(s.others, line)
	}
}

func (s *loadStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 50 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

func (s *loadStats) status(code int) {
	v, _ := s.statuses.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// fetchRound does what a mirror or a careful client does: InRelease, then the Packages
// it names by hash, then one pool file that Packages lists. Every answer must be 200
// with a body whose sha256 is its ETag (and, for the by-hash index and the pool file,
// the digest that named it).
func fetchRound(c *cluster, host string, rng *rand.Rand, s *loadStats) {
	get := func(path string) ([]byte, bool) {
		resp, body, err := c.get(host, path)
		s.fetches.Add(1)
		if err != nil {
			s.fail("GET %s: %v", path, err)
			return nil, false
		}
		s.status(resp.StatusCode)
		if resp.StatusCode != 200 {
			s.fail("GET %s: status %d: %q", path, resp.StatusCode, body)
			return nil, false
		}
		if err := checkETag(resp, body); err != nil {
			s.fail("%v", err)
			return nil, false
		}
		return body, true
	}
	inrel, ok := get("/dists/stable/InRelease")
	if !ok {
		return
	}
	s.inReleases.Store(sha256Hex(inrel), true)
	sum, ok := releaseSHA256(inrel, "main/binary-amd64/Packages.gz")
	if !ok {
		s.fail("InRelease lists no main/binary-amd64/Packages.gz:\n%s", inrel)
		return
	}
	gz, ok := get("/dists/stable/main/binary-amd64/by-hash/SHA256/" + sum)
	if !ok {
		return
	}
	if got := sha256Hex(gz); got != sum {
		s.fail("by-hash %s served bytes with sha256 %s", sum, got)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		s.fail("by-hash %s: %v", sum, err)
		return
	}
	packages, err := io.ReadAll(zr)
	if err != nil {
		s.fail("by-hash %s: %v", sum, err)
		return
	}
	files := packagesFiles(packages)
	if len(files) == 0 {
		s.fail("Packages %s lists no files", sum)
		return
	}
	f := files[rng.IntN(len(files))]
	deb, ok := get("/" + f.path)
	if !ok {
		return
	}
	if got := sha256Hex(deb); got != f.sha256 {
		s.fail("%s: sha256 %s, Packages says %s", f.path, got, f.sha256)
		return
	}
	s.rounds.Add(1)
}

// releaseSHA256 finds name's digest in the SHA256 field of a Release or InRelease.
func releaseSHA256(release []byte, name string) (string, bool) {
	in := false
	sc := bufio.NewScanner(bytes.NewReader(release))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "SHA256:"):
			in = true
		case in && strings.HasPrefix(line, " "):
			if f := strings.Fields(line); len(f) == 3 && f[2] == name {
				return f[0], true
			}
		default:
			in = false
		}
	}
	return "", false
}

type poolFile struct{ path, sha256 string }

// packagesFiles returns the Filename and SHA256 of each stanza of a Packages file.
func packagesFiles(packages []byte) []poolFile {
	var files []poolFile
	var cur poolFile
	for _, line := range strings.Split(string(packages), "\n") {
		switch {
		case line == "":
			if cur.path != "" {
				files = append(files, cur)
			}
			cur = poolFile{}
		case strings.HasPrefix(line, "Filename: "):
			cur.path = strings.TrimPrefix(line, "Filename: ")
		case strings.HasPrefix(line, "SHA256: "):
			cur.sha256 = strings.TrimPrefix(line, "SHA256: ")
		}
	}
	if cur.path != "" {
		files = append(files, cur)
	}
	return files
}

// aptRound runs apt-get update and then downloads one package apt now knows of; both
// must succeed without a warning or an error line. A fresh round first deletes apt's
// lists, as a new client would start, so the update fetches InRelease and the indexes
// whatever release is active; otherwise apt asks with If-Modified-Since and keeps the
// newest InRelease (by Date) it has seen.
func aptRound(apt *apttest.Apt, rng *rand.Rand, known []string, fresh bool, s *loadStats) {
	if fresh {
		lists := filepath.Join(apt.Root, "state", "lists")
		ents, err := os.ReadDir(lists)
		if err != nil {
			s.fail("%v", err)
			return
		}
		for _, e := range ents {
			if !e.IsDir() {
				if err := os.Remove(filepath.Join(lists, e.Name())); err != nil {
					s.fail("%v", err)
					return
				}
			}
		}
	}
	out, err := apt.Cmd("update").CombinedOutput()
	s.updates.Add(1)
	if err != nil {
		s.fail("apt-get update: %v\n%s", err, out)
		return
	}
	if bad := updateTrouble(string(out)); len(bad) > 0 {
		s.fail("apt-get update reported problems:\n%s\nfull output:\n%s", strings.Join(bad, "\n"), out)
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Get:") && strings.Contains(line, " InRelease"):
			s.inReleaseGets.Add(1)
		case strings.HasPrefix(line, "Get:"), strings.HasPrefix(line, "Hit:"), strings.HasPrefix(line, "Fetched "),
			strings.HasPrefix(line, "Reading package lists"), line == "":
		default:
			s.other(line)
		}
	}
	// Packages apt knows of after this update: those of some release, not necessarily
	// the active one (apt keeps the newest InRelease by Date it has seen).
	pol, err := apt.CacheCmd(append([]string{"policy"}, known...)...).CombinedOutput()
	if err != nil {
		s.fail("apt-cache policy: %v\n%s", err, pol)
		return
	}
	var have []string
	var name string
	for _, line := range strings.Split(string(pol), "\n") {
		if n, ok := strings.CutSuffix(line, ":"); ok && !strings.HasPrefix(line, " ") {
			name = n
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok && strings.TrimSpace(v) != "(none)" {
			have = append(have, name)
		}
	}
	if len(have) == 0 {
		s.fail("after apt-get update apt knows none of %v:\n%s\nupdate said:\n%s", known, pol, out)
		return
	}
	dir, err := os.MkdirTemp("", "armor-flip-download")
	if err != nil {
		s.fail("%v", err)
		return
	}
	defer os.RemoveAll(dir)
	pick := have[rng.IntN(len(have))]
	cmd := apt.Cmd("download", pick)
	cmd.Dir = dir
	if dl, err := cmd.CombinedOutput(); err != nil {
		s.fail("apt-get download %s: %v\n%s", pick, err, dl)
	}
}

// TestEdgeFlipsUnderLoad flips the active release among four recorded releases (which
// add, remove and upgrade packages) at least twenty times, while apt-get updates and
// downloads in a loop and other clients fetch InRelease, the by-hash index it names and a
// pool file that index lists. Every apt run must be clean and every answer a 200 whose
// body matches its ETag: the retention window keeps the by-hash indexes and pool files of
// recent releases served, so a client holding any of them never sees a mismatch.
func TestEdgeFlipsUnderLoad(t *testing.T) {
	c := newCluster(t)
	p := c.newProject(t, "flip", "apt.flip.test")

	// Four releases, each with a distinct, increasing Date in the past (apt refuses a
	// Date in the future, and orders InReleases by Date).
	const nrel = 4
	base := time.Now().Add(-time.Hour).Unix()
	ids := make([]string, nrel)
	var known []string
	for k := range nrel {
		p.setDebs(t, flipRelease(k))
		ids[k] = p.build(t, fmt.Sprintf("SOURCE_DATE_EPOCH=%d", base+int64(60*k)))
		p.push(t, c)
		for _, q := range flipRelease(k) {
			if !slices.Contains(known, q.name) {
				known = append(known, q.name)
			}
		}
	}
	waitServed(t, c.edge, p.host, p.tree())
	active := ids[nrel-1]

	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{p.source()}, Proxy: "http://" + c.edge})
	apt.Update(t)

	var s loadStats
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 1))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			aptRound(apt, rng, known, i%2 == 0, &s)
		}
	}()
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(2, uint64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				fetchRound(c, p.host, rng, &s)
			}
		}()
	}

	// The flips, through the armor binary as an operator runs them. Activating an older
	// release rolls back the newer ones, so flipping to them again takes --force.
	const flips = 24
	rng := rand.New(rand.NewPCG(3, 3))
	start := time.Now()
	for range flips {
		next := ids[rng.IntN(nrel)]
		for next == active {
			next = ids[rng.IntN(nrel)]
		}
		out := armor(t, p.dir, c.env(), "activate", "--force", next, "--expect", active)
		if !strings.Contains(out, "activated") {
			t.Fatalf("armor activate: %s", out)
		}
		active = next
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
	}
	flipTime := time.Since(start)
	close(stop)
	wg.Wait()

	var codes []string
	s.statuses.Range(func(k, v any) bool {
		codes = append(codes, fmt.Sprintf("%d×%d", v.(*atomic.Int64).Load(), k.(int)))
		return true
	})
	slices.Sort(codes)
	t.Logf("%d flips in %v; %d apt-get update+download rounds (%d fetched an InRelease); %d fetches in %d complete rounds; statuses %v",
		flips, flipTime.Round(time.Millisecond), s.updates.Load(), s.inReleaseGets.Load(), s.fetches.Load(), s.rounds.Load(), codes)
	if len(s.others) > 0 {
		t.Logf("other apt-get update lines:\n%s", strings.Join(s.others, "\n"))
	}
	for _, prob := range s.problems {
		t.Error(prob)
	}
	served := 0
	s.inReleases.Range(func(any, any) bool { served++; return true })
	if served != nrel {
		t.Errorf("the fetchers were served %d distinct InReleases; want all %d releases' (the flips did not reach the edge?)", served, nrel)
	}
	if s.updates.Load() < 3 || s.rounds.Load() < 20 {
		t.Errorf("too little load to mean anything: %d apt rounds, %d fetch rounds", s.updates.Load(), s.rounds.Load())
	}

	// After the storm, apt converges on the newest release. The final activation comes
	// more than a second after the one before, so apt's If-Modified-Since (one-second
	// resolution) cannot hide it.
	newest := ids[nrel-1]
	if active == newest {
		armor(t, p.dir, c.env(), "activate", "--force", ids[0], "--expect", active)
		active = ids[0]
	}
	time.Sleep(1100 * time.Millisecond)
	armor(t, p.dir, c.env(), "activate", "--force", newest, "--expect", active)
	waitServed(t, c.edge, p.host, p.tree())
	apt.Update(t)
	for _, q := range flipRelease(nrel - 1) {
		if got := apt.Policy(t, q.name); got != q.version {
			t.Errorf("after activating the newest release, apt candidate for %s = %q, want %q", q.name, got, q.version)
		}
	}
	if got := apt.Policy(t, "flip-00"); got != "" {
		t.Errorf("flip-00 (only in the first releases) is still a candidate: %q", got)
	}
}

// gate forwards TCP connections from its own loopback address to target, and can be
// closed (listener and every open connection) and opened again on the same address: an
// object store that becomes unreachable and comes back.
type gate struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newGate(t *testing.T, target string) *gate {
	t.Helper()
	g := &gate{target: target, conns: map[net.Conn]bool{}}
	g.open(t, "127.0.0.1:0")
	t.Cleanup(g.close)
	return g
}

// open listens on addr and forwards what it accepts.
func (g *gate) open(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	g.mu.Lock()
	g.ln, g.addr = ln, ln.Addr().String()
	g.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.forward(c)
		}
	}()
}

func (g *gate) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil {
		return false
	}
	g.conns[c] = true
	return true
}

func (g *gate) forward(c net.Conn) {
	defer c.Close()
	if !g.track(c) {
		return
	}
	u, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer u.Close()
	if !g.track(u) {
		return
	}
	go func() { io.Copy(u, c); u.Close() }()
	io.Copy(c, u)
}

// close stops listening and cuts every forwarded connection.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

// storeFault is a way to take the object store away and bring it back.
type storeFault struct {
	name string
	// setup returns the store remote ("" for a local directory in the cluster's work
	// directory) and, given the cluster, the functions that take it away and back.
	setup func(t *testing.T) (remote string, away, back func(t *testing.T, c *cluster))
	// missStatuses are the statuses accepted for a miss while the store is away.
	missStatuses []int
}

// TestEdgeFaults: with controld killed the edge keeps serving; restarted with controld
// still down it serves from its state directory; with the store taken away it still
// serves what it has cached (and apt still works), and a miss is refused; once the store
// is back the miss is served.
//
// Either way the store cannot serve the miss, and edged gives the design's answer: 503
// with Retry-After. (A local store whose directory is renamed away is, to rclone, a
// store that lacks the object; an object a recorded release lists is missing only
// during an outage.)
func TestEdgeFaults(t *testing.T) {
	faults := []storeFault{
		{
			name: "local directory renamed",
			setup: func(t *testing.T) (string, func(*testing.T, *cluster), func(*testing.T, *cluster)) {
				rename := func(from, to func(*cluster) string) func(*testing.T, *cluster) {
					return func(t *testing.T, c *cluster) {
						t.Helper()
						if err := os.Rename(from(c), to(c)); err != nil {
							t.Fatal(err)
						}
					}
				}
				dir := func(c *cluster) string { return c.store }
				gone := func(c *cluster) string { return c.store + ".gone" }
				return "", rename(dir, gone), rename(gone, dir)
			},
			missStatuses: []int{503},
		},
		{
			name: "S3 endpoint unreachable",
			setup: func(t *testing.T) (string, func(*testing.T, *cluster), func(*testing.T, *cluster)) {
				srv := s3test.Start(t)
				srv.Remote("armor", "") // creates the bucket
				g := newGate(t, strings.TrimPrefix(srv.Endpoint, "http://"))
				remote := s3test.EndpointRemote("http://"+g.addr, srv.KeyID, srv.Secret, "armor", "edge")
				away := func(t *testing.T, _ *cluster) { g.close() }
				back := func(t *testing.T, _ *cluster) { t.Helper(); g.open(t, g.addr) }
				return remote, away, back
			},
			missStatuses: []int{503},
		},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) { edgeFaults(t, f) })
	}
}

func edgeFaults(t *testing.T, f storeFault) {
	remote, storeAway, storeBack := f.setup(t)
	c := newClusterWith(t, remote)
	p := c.newProject(t, "fault", "apt.fault.test")
	var pkgs []pkg
	for i := range 6 {
		pkgs = append(pkgs, pkg{fmt.Sprintf("fault-%d", i), "1.0-1", ""})
	}
	p.setDebs(t, pkgs)
	p.build(t)
	p.push(t, c)
	waitServed(t, c.edge, p.host, p.tree())
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{p.source()}, Proxy: "http://" + c.edge})
	apt.Update(t)
	pool := p.poolFiles(t)
	if len(pool) != len(pkgs) {
		t.Fatalf("pool has %d files, want %d: %v", len(pool), len(pkgs), pool)
	}

	// controld dies: the edge keeps serving the routes it has.
	c.controld.kill(t)
	if resp, err := http.Get("http://" + c.controldAddr + "/v1/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("controld still answers after SIGKILL")
	}
	apt.Update(t)
	apt.Download(t, "fault-0")

	// edged dies too, and comes back with controld still down: it routes from its state
	// directory and fetches from the store.
	c.edged.kill(t)
	c.startEdged(t)
	waitServed(t, c.edge, p.host, p.tree())
	apt.Update(t)
	apt.Download(t, "fault-1")
	// What this edge has fetched (and cached): InRelease, the by-hash index apt uses, and
	// two pool files.
	cached := []string{"/dists/stable/InRelease", p.byHashPackages(t), pool[0], pool[1]}
	for _, path := range cached {
		resp, body := c.mustGet(t, p.host, path, 200)
		if err := checkETag(resp, body); err != nil {
			t.Fatal(err)
		}
	}

	// The store goes away: the cache still serves, apt still updates and downloads what
	// is cached, and a miss is refused.
	storeAway(t, c)
	for _, path := range cached {
		resp, body := c.mustGet(t, p.host, path, 200)
		if err := checkETag(resp, body); err != nil {
			t.Errorf("store away, cached %s: %v", path, err)
		}
	}
	apt.Update(t)
	apt.Download(t, "fault-0", "fault-1")
	miss := pool[len(pool)-1]
	asked := time.Now()
	resp, body, err := c.get(p.host, miss)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store away, never-fetched %s: status %d after %v, Retry-After %q, body %q",
		miss, resp.StatusCode, time.Since(asked).Round(time.Millisecond), resp.Header.Get("Retry-After"), body)
	switch {
	case !slices.Contains(f.missStatuses, resp.StatusCode):
		t.Errorf("store away, miss %s: status %d, want one of %v", miss, resp.StatusCode, f.missStatuses)
	case resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "":
		t.Errorf("store away, miss %s: 503 without Retry-After", miss)
	}

	// The store comes back: the miss is served.
	storeBack(t, c)
	resp, body = c.mustGet(t, p.host, miss, 200)
	if err := checkETag(resp, body); err != nil {
		t.Error(err)
	}
}

// TestEdgePushToServeLatency reports how long after `armor push` returns the edge serves
// the new InRelease (the target is at most one second). It asserts only that the
// new InRelease is served; the figures are logged, never asserted.
func TestEdgePushToServeLatency(t *testing.T) {
	c := newCluster(t)
	p := c.newProject(t, "lat", "apt.lat.test")
	pkgs := []pkg{{"lat-0", "1.0-1", ""}}
	p.setDebs(t, pkgs)
	p.build(t)
	p.push(t, c)
	waitServed(t, c.edge, p.host, p.tree())

	const pushes = 5
	var pushTimes, serveTimes []time.Duration
	for i := 1; i <= pushes; i++ {
		pkgs = append(pkgs, pkg{fmt.Sprintf("lat-%d", i), "1.0-1", "lat-0"})
		p.setDebs(t, pkgs)
		p.build(t)
		want := p.inRelease(t)
		start := time.Now()
		p.push(t, c)
		pushed := time.Now()
		deadline := pushed.Add(15 * time.Second)
		for {
			resp, body, err := c.get(p.host, "/dists/stable/InRelease")
			if err == nil && resp.StatusCode == 200 && bytes.Equal(body, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("push %d: the edge did not serve the new InRelease within 15s (err %v)", i, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		pushTimes = append(pushTimes, pushed.Sub(start))
		serveTimes = append(serveTimes, time.Since(pushed))
	}
	slices.Sort(pushTimes)
	slices.Sort(serveTimes)
	t.Logf("armor push (upload + record + activate): median %v, max %v over %d pushes",
		pushTimes[pushes/2].Round(time.Millisecond), pushTimes[pushes-1].Round(time.Millisecond), pushes)
	t.Logf("push returned -> edge serves the new InRelease: median %v, max %v over %d pushes (all: %v)",
		serveTimes[pushes/2].Round(time.Millisecond), serveTimes[pushes-1].Round(time.Millisecond), pushes, serveTimes)
}
