package cli_test

// The whole system under faults (issue #21, item 4): PostgreSQL, two controld replicas,
// three edges and an S3 store, all real processes on loopback. While a pipeline pushes
// and apt-get runs against every edge, each replica and each edge is killed (SIGKILL)
// once, in turn, and started again.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// announced is a daemon started on kernel-chosen ports (127.0.0.1:0), which it then
// keeps across restarts: the addresses its log announced on the first start.
type announced struct {
	name, log string
	addrs     map[string]string // the fields of the first start's announcement
	proc      *proc
}

// logField matches one key=value of a slog text line.
var logField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// startAnnounced starts armor with args and waits until its log has a line with msg,
// returning that line's fields. The log is appended to, so a restart reads only what
// follows the previous run's output. A daemon restarted on the port the kernel gave it
// at first may find it taken meanwhile, as the source port of some connection: it is
// started again, a few times, until the port is free.
func startAnnounced(t *testing.T, env []string, logPath, msg string, args ...string) (*proc, map[string]string) {
	t.Helper()
	var from int64
	if fi, err := os.Stat(logPath); err == nil {
		from = fi.Size()
	}
	p := startProc(t, env, logPath, args...)
	deadline := time.Now().Add(20 * time.Second)
	for tries := 1; ; {
		data, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data[from:]), "\n") {
			if fields := announcement(line, msg); fields != nil {
				return p, fields
			}
		}
		select {
		case <-p.done:
			if !bytes.Contains(data[from:], []byte("address already in use")) || tries == 10 {
				t.Fatalf("%s exited before saying %q:\n%s", filepath.Base(logPath), msg, data[from:])
			}
			tries++
			time.Sleep(500 * time.Millisecond)
			from, deadline = int64(len(data)), time.Now().Add(20*time.Second)
			p = startProc(t, env, logPath, args...)
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not say %q within 20s:\n%s", filepath.Base(logPath), msg, data[from:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// announcement returns the fields of a log line (slog's text or JSON) whose message is
// msg, or nil.
func announcement(line, msg string) map[string]string {
	fields := map[string]string{}
	var rec map[string]any
	switch {
	case json.Unmarshal([]byte(line), &rec) == nil:
		if rec["msg"] != msg {
			return nil
		}
		for k, v := range rec {
			fields[k] = fmt.Sprint(v)
		}
	case strings.Contains(line, `msg="`+msg+`"`):
		for _, m := range logField.FindAllStringSubmatch(line, -1) {
			fields[m[1]] = strings.Trim(m[2], `"`)
		}
	default:
		return nil
	}
	return fields
}

// faultSite is the deployment under test.
type faultSite struct {
	work, store, db   string
	admin, edgeToken  string
	replicas          [2]*replica
	edges             [3]*edge
	project           *project
	pushMu            sync.Mutex // held by each push; the test holds it to pause the pipeline
	pushes            atomic.Int64
	pushing           atomic.Bool  // a push (not a build) is running
	via               atomic.Value // string: the controld URLs of the pipeline's next push, if set
	lastPush          atomic.Int64 // how long the last push took, in ns
	pushErrs, pushed  []string     // under pushMu
	pushedIDs         []string     // under pushMu
	controldURLs      string       // every replica, comma-separated
	nextPkg           int          // under pushMu
	aptRounds         [3]atomic.Int64
	aptStats          [3]loadStats
	baseNames         []string
	edgeCatchUp       []time.Duration
	replicaCatchUpLog []string
}

type replica struct {
	announced
	url string
}

type edge struct {
	announced
	addr, admin, stateDir string
	controld              string // the replicas it polls, comma-separated
	// up is read-held by each apt round against the edge; the test write-holds it while
	// the edge is down, so apt runs only against running edges.
	up  sync.RWMutex
	apt *apttest.Apt
}

func (f *faultSite) startReplica(t *testing.T, r *replica) {
	t.Helper()
	listen := "127.0.0.1:0"
	if r.addrs != nil {
		listen = r.addrs["addr"]
	}
	var fields map[string]string
	r.proc, fields = startAnnounced(t, nil, r.log, "controld listening",
		"controld", "--listen", listen, "--database", f.db, "--store", f.store)
	if r.addrs == nil {
		r.addrs = fields
		r.url = "http://" + fields["addr"]
	}
	waitHTTP(t, r.url+"/v1/healthz")
}

func (f *faultSite) startEdge(t *testing.T, e *edge) {
	t.Helper()
	listen, admin := "127.0.0.1:0", "127.0.0.1:0"
	if e.addrs != nil {
		listen, admin = e.addrs["listen"], e.addrs["admin"]
	}
	var fields map[string]string
	e.proc, fields = startAnnounced(t, []string{"ARMOR_EDGE_TOKEN=" + f.edgeToken}, e.log, "edged listening",
		"edged", "--listen", listen, "--admin-listen", admin, "--controld", e.controld,
		"--store", f.store, "--state-dir", e.stateDir)
	if e.addrs == nil {
		e.addrs = fields
		e.addr, e.admin = fields["listen"], fields["admin"]
	}
	waitHTTP(t, "http://"+e.admin+"/healthz")
}

// pushOne adds one package, builds, and pushes through controld (the replicas of
// armor.toml when "", else that URL list). It returns the release id, or an error
// with everything armor said. The caller holds pushMu.
func (f *faultSite) pushOne(controld string) (string, error) {
	name := fmt.Sprintf("faultpush-%03d", f.nextPkg)
	f.nextPkg++
	if _, err := synth.WriteOne(filepath.Join(f.project.dir, "debs"), name, "1.0-1", "amd64", ""); err != nil {
		return "", err
	}
	out, err := armorErr(f.project.dir, nil, "build", "--json")
	if err != nil {
		return "", fmt.Errorf("armor build adding %s: %v\n%s", name, err, out)
	}
	var id string
	if m := regexp.MustCompile(`"release": *"([0-9a-f]{64})"`).FindStringSubmatch(out); m != nil {
		id = m[1]
	} else {
		return "", fmt.Errorf("armor build --json names no release:\n%s", out)
	}
	args := []string{"push"}
	if controld != "" {
		args = append(args, "--controld", controld)
	}
	f.pushing.Store(true)
	start := time.Now()
	out, err = armorErr(f.project.dir, []string{"ARMOR_TOKEN=" + f.admin}, args...)
	f.pushing.Store(false)
	f.lastPush.Store(int64(time.Since(start)))
	if err != nil || !strings.Contains(out, "recorded and activated") {
		return "", fmt.Errorf("armor push of %s (release %s, %v): %v\n%s", name, shortID(id), time.Since(start).Round(time.Millisecond), err, out)
	}
	f.pushed = append(f.pushed, name)
	f.pushedIDs = append(f.pushedIDs, id)
	f.pushes.Add(1)
	return id, nil
}

// waitPushes waits until n more pushes have succeeded since before.
func (f *faultSite) waitPushes(t *testing.T, before int64, n int64, why string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for f.pushes.Load() < before+n {
		if time.Now().After(deadline) {
			f.pushMu.Lock()
			defer f.pushMu.Unlock()
			t.Fatalf("%s: %d pushes within 60s, want %d; push errors:\n%s", why, f.pushes.Load()-before, n, strings.Join(f.pushErrs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killDuringPush kills p while a push is (most likely) running: it waits for a push to
// start, then a random moment within the time the last push took, so that the kill
// lands in any of its steps (checks, upload, record and activate).
func (f *faultSite) killDuringPush(t *testing.T, name string, p *proc, rng *rand.Rand) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f.pushing.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	n := f.pushes.Load()
	time.Sleep(time.Duration(rng.Int64N(max(f.lastPush.Load(), int64(time.Millisecond)))))
	p.kill(t)
	t.Logf("killed %s; the push it interrupted had ended: %v", name, f.pushes.Load() > n || !f.pushing.Load())
}

// edgesServeLast pauses the pipeline and waits until every edge serves the release
// pushed last: an edge whose first replica is down polls the other.
func (f *faultSite) edgesServeLast(t *testing.T, why string) {
	t.Helper()
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	for _, e := range f.edges {
		start := time.Now()
		waitServed(t, e.addr, f.project.host, f.project.tree())
		t.Logf("%s: %s serves the last push after %v", why, e.name, time.Since(start).Round(time.Millisecond))
	}
}

// routes reads a replica's routes feed: at once when since is 0, else a long poll.
func (f *faultSite) routes(ctx context.Context, url string, since uint64, wait time.Duration) (version uint64, active string, err error) {
	r, err := client.New(url, f.edgeToken, nil).Routes(ctx, since, wait)
	if err != nil {
		return 0, "", err
	}
	for _, s := range r.Sites {
		if s.Repository == f.project.name && s.Active != nil {
			active = s.Active.ID
		}
	}
	return r.Version, active, nil
}

// TestFaults: PostgreSQL, two controld replicas, three edges and an S3 store, each a
// real process on loopback. A pipeline pushes a new package again and again while each
// edge has an apt client running apt-get update and download in a loop. Each replica is
// killed (SIGKILL) once, in turn: the first once it has recorded and activated a push's
// release and before its answer reaches the push, the second at any moment of a push.
// The pushes go on through the other replica (the CLI's failover, and recording is
// idempotent, so a push cut off mid-way finishes there), edges polling the dead replica
// poll the other, and the replica, started again, catches up: its routes feed has the
// survivor's version, and its long poll wakes at a push through the survivor
// (LISTEN/NOTIFY). A replica frozen (SIGSTOP) holds the next push up for the client's
// read attempt only. Then each edge is killed once, in turn, while the pipeline pushes:
// the apt clients of the other edges see no error, and the edge, started again, serves
// the release activated while it was down. At the end the active release, as apt sees
// it through every edge, has every pushed package, and every recorded release is whole
// in the store.
func TestFaults(t *testing.T) {
	pg := pgtest.Start(t)
	s3 := s3test.Start(t)
	work := t.TempDir()
	f := &faultSite{work: work, db: deployDatabase(t, pg), store: s3.Remote("armor", "faults")}
	f.admin = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--database", f.db, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	f.edgeToken = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--database", f.db, "edge",
		"--for", "*", "--action", "read"))

	var urls []string
	for i := range f.replicas {
		r := &replica{announced: announced{name: fmt.Sprintf("controld-%c", 'a'+i), log: filepath.Join(work, fmt.Sprintf("controld-%c.log", 'a'+i))}}
		f.startReplica(t, r)
		f.replicas[i] = r
		urls = append(urls, r.url)
	}
	f.controldURLs = strings.Join(urls, ",")

	const host = "apt.faults.test"
	p := &project{dir: filepath.Join(work, "faults"), name: "faults", host: host}
	f.project = p
	armor(t, work, nil, "init", "--dir", p.dir, "--name", p.name, "--hostname", host,
		"--key-algo", "eddsa", "--store", f.store, "--controld", f.controldURLs)
	armor(t, p.dir, []string{"ARMOR_TOKEN=" + f.admin}, "repos", "create")
	var base []pkg
	for i := range 4 {
		base = append(base, pkg{fmt.Sprintf("faultbase-%d", i), "1.0-1", ""})
		f.baseNames = append(f.baseNames, base[i].name)
	}
	p.setDebs(t, base)
	p.build(t)
	p.push(t, &cluster{admin: f.admin})

	// Each edge polls both replicas, the first in its list not the same for all.
	for i := range f.edges {
		e := &edge{announced: announced{name: fmt.Sprintf("edged-%d", i), log: filepath.Join(work, fmt.Sprintf("edged-%d.log", i))},
			stateDir: filepath.Join(work, fmt.Sprintf("edged-%d", i)), controld: urls[i%2] + "," + urls[(i+1)%2]}
		f.startEdge(t, e)
		f.edges[i] = e
		waitServed(t, e.addr, host, p.tree())
		e.apt = apttest.New(t, apttest.Options{Sources: []apttest.Source{p.source()}, Proxy: "http://" + e.addr})
		e.apt.Update(t)
	}

	// The load: a pipeline pushing, and an apt client per edge.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.pushMu.Lock()
			via, _ := f.via.Swap("").(string)
			if _, err := f.pushOne(via); err != nil {
				f.pushErrs = append(f.pushErrs, err.Error())
			}
			f.pushMu.Unlock()
		}
	}()
	for i, e := range f.edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(21, uint64(i)))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				e.up.RLock()
				aptRound(e.apt, rng, f.baseNames, n%2 == 0, &f.aptStats[i])
				e.up.RUnlock()
				f.aptRounds[i].Add(1)
			}
		}()
	}
	// On a failure below, stop the load before the daemons go.
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopLoad)

	rng := rand.New(rand.NewPCG(4, 21))
	start := time.Now()
	f.waitPushes(t, 0, 1, "before the faults")

	// The replicas, in turn, then the edges. The first replica dies once it has recorded
	// and activated a release and before it answers; the second at any moment of a push.
	for i, r := range f.replicas {
		other := f.replicas[1-i]
		if i == 0 {
			f.killAfterRecord(t, r, other)
		} else {
			f.killDuringPush(t, r.name, r.proc, rng)
		}
		f.replicaCatchUp(t, r, other)
	}
	f.freezeReplica(t, f.replicas[0])
	for _, e := range f.edges {
		f.edgeFault(t, e)
	}
	faults := time.Since(start)
	stopLoad()

	// What the clients saw.
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	for _, err := range f.pushErrs {
		t.Error(err)
	}
	for i := range f.edges {
		for _, prob := range f.aptStats[i].problems {
			t.Errorf("apt through %s: %s", f.edges[i].name, prob)
		}
		if f.aptRounds[i].Load() < 3 {
			t.Errorf("apt through %s ran %d rounds: too few to mean anything", f.edges[i].name, f.aptRounds[i].Load())
		}
	}
	t.Logf("%d pushes in %v of faults; apt rounds per edge %d, %d, %d; %s; restarted edges served the active release after %v",
		len(f.pushed), faults.Round(time.Millisecond), f.aptRounds[0].Load(), f.aptRounds[1].Load(), f.aptRounds[2].Load(),
		strings.Join(f.replicaCatchUpLog, "; "), f.edgeCatchUp)
	if len(f.pushed) < 6 {
		t.Errorf("%d pushes: the faults did not happen during pushes", len(f.pushed))
	}

	// Both replicas agree on the active release: the last one pushed.
	last := f.pushedIDs[len(f.pushedIDs)-1]
	for _, r := range f.replicas {
		if _, active, err := f.routes(context.Background(), r.url, 0, 0); err != nil || active != last {
			t.Errorf("%s: active %s (%v), want the last push's %s", r.name, shortID(active), err, shortID(last))
		}
	}
	// Every edge serves it, and apt through it has every package ever pushed.
	for _, e := range f.edges {
		waitServed(t, e.addr, host, p.tree())
		apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{p.source()}, Proxy: "http://" + e.addr})
		apt.Update(t)
		names := append(append([]string{}, f.baseNames...), f.pushed...)
		out, err := apt.CacheCmd(append([]string{"policy"}, names...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("apt-cache policy through %s: %v\n%s", e.name, err, out)
		}
		if n := strings.Count(string(out), "Candidate: 1.0-1"); n != len(names) {
			t.Errorf("through %s apt has %d of the %d packages pushed:\n%s", e.name, n, len(names), out)
		}
	}
	// No release is half-recorded: every release controld keeps has all its objects,
	// intact, in the store.
	if out, err := armorErr(p.dir, []string{"ARMOR_TOKEN=" + f.admin}, "store", "check", "--read-data"); err != nil {
		t.Errorf("armor store check after the faults: %v\n%s", err, out)
	}
}

// replicaCatchUp, with replica r just killed, waits for three pushes through other and
// every edge serving the last, starts r again and checks that it has caught up.
func (f *faultSite) replicaCatchUp(t *testing.T, r, other *replica) {
	t.Helper()
	killed := time.Now()
	f.waitPushes(t, f.pushes.Load(), 3, r.name+" killed: pushes through "+other.name)
	f.edgesServeLast(t, r.name+" down")
	f.startReplica(t, r)
	t.Logf("%s was down %v", r.name, time.Since(killed).Round(time.Millisecond))

	// With the pipeline paused: the restarted replica has the survivor's routes, and its
	// long poll wakes at a push through the survivor alone.
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := f.pushedIDs[len(f.pushedIDs)-1]
	v, active, err := f.routes(ctx, r.url, 0, 0)
	ov, oactive, oerr := f.routes(ctx, other.url, 0, 0)
	if err != nil || oerr != nil || v != ov || active != oactive || active != last {
		t.Fatalf("restarted %s: routes version %d, active %s (%v); %s: %d, %s (%v); last push %s",
			r.name, v, shortID(active), err, other.name, ov, shortID(oactive), oerr, shortID(last))
	}
	type poll struct {
		v      uint64
		active string
		err    error
		at     time.Time
	}
	woke := make(chan poll, 1)
	go func() {
		v, a, err := f.routes(ctx, r.url, v, 25*time.Second)
		woke <- poll{v, a, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is held
	id, err := f.pushOne(other.url)
	pushed := time.Now()
	if err != nil {
		t.Fatalf("push through %s alone: %v", other.name, err)
	}
	got := <-woke
	if got.err != nil || got.v <= v || got.active != id || got.at.Sub(pushed) > 5*time.Second {
		t.Fatalf("long poll on restarted %s at version %d: version %d, active %s, %v after the push through %s (%v); want %s at once",
			r.name, v, got.v, shortID(got.active), got.at.Sub(pushed).Round(time.Millisecond), other.name, got.err, shortID(id))
	}
	f.replicaCatchUpLog = append(f.replicaCatchUpLog, fmt.Sprintf("%s's long poll woke %v after the push through %s returned",
		r.name, max(0, got.at.Sub(pushed)).Round(time.Millisecond), other.name))
}

// edgeFault stops apt against edge e, kills e, waits for a push while it is down,
// starts it again, checks that it serves the new active release, and lets apt at it
// again.
func (f *faultSite) edgeFault(t *testing.T, e *edge) {
	t.Helper()
	e.up.Lock()
	defer e.up.Unlock()
	e.proc.kill(t)
	f.waitPushes(t, f.pushes.Load(), 1, e.name+" killed")
	f.startEdge(t, e)
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	restarted := time.Now()
	waitServed(t, e.addr, f.project.host, f.project.tree())
	f.edgeCatchUp = append(f.edgeCatchUp, time.Since(restarted).Round(time.Millisecond))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// deployDatabase makes the role and database of configs/deploy/postgres.sql on pg, and
// returns configs/deploy/controld.toml's database URL pointed at pg (without TLS): the
// test runs on the settings the deployment recommends.
func deployDatabase(t *testing.T, pg *pgtest.Server) string {
	t.Helper()
	cfg, err := controld.LoadConfig("../configs/deploy/controld.toml")
	if err != nil {
		t.Fatal(err)
	}
	sql, err := os.ReadFile("../configs/deploy/postgres.sql")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stmt strings.Builder
	for _, line := range strings.Split(string(sql), "\n") {
		if strings.HasPrefix(line, "--") {
			continue
		}
		stmt.WriteString(line + "\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			if _, err := conn.Exec(ctx, stmt.String()); err != nil {
				t.Fatalf("configs/deploy/postgres.sql: %s: %v", strings.TrimSpace(stmt.String()), err)
			}
			stmt.Reset()
		}
	}
	u, err := url.Parse(cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", pg.Port())
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// killAfterRecord makes the pipeline's next push talk to replica r through a proxy that,
// once r has answered the push's recording (the release is recorded and active in the
// database), kills r and closes the connection instead of passing the answer on: the
// push must finish through other, recording and activating again, idempotently.
func (f *faultSite) killAfterRecord(t *testing.T, r, other *replica) {
	t.Helper()
	cut := make(chan string, 1)
	proxy := startCutProxy(t, r.addrs["addr"], func(req *http.Request, resp *http.Response) bool {
		if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/releases") {
			return false
		}
		r.proc.cmd.Process.Kill()
		<-r.proc.done
		cut <- resp.Status
		return true
	})
	before := f.pushes.Load()
	f.via.Store("http://" + proxy + "," + other.url)
	select {
	case status := <-cut:
		t.Logf("killed %s after it answered a recording %s, before the answer reached the push", r.name, status)
	case <-time.After(60 * time.Second):
		t.Fatalf("no push recorded through the proxy to %s within 60s", r.name)
	}
	f.waitPushes(t, before, 1, "the push whose answer "+r.name+" never gave")
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	if len(f.pushErrs) > 0 {
		t.Fatalf("pushes failed:\n%s", strings.Join(f.pushErrs, "\n"))
	}
}

// startCutProxy forwards HTTP/1.1 requests to target, a connection upstream for each
// connection accepted, until cut, given a request and target's answer, returns true:
// that answer is dropped and the client's connection closed. It returns its address.
func startCutProxy(t *testing.T, target string, cut func(*http.Request, *http.Response) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				cr, ur := bufio.NewReader(c), bufio.NewReader(up)
				for {
					req, err := http.ReadRequest(cr)
					if err != nil || req.Write(up) != nil {
						return
					}
					resp, err := http.ReadResponse(ur, req)
					if err != nil {
						return
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || cut(req, resp) {
						return
					}
					resp.Body = io.NopCloser(bytes.NewReader(body))
					if resp.Write(c) != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// freezeReplica stops replica r (SIGSTOP) between two pushes, and lets the pipeline push
// once: r's kernel still accepts connections, so the push gets no error from r, only no
// answer, and must move on to the other replica after the client's read attempt
// (controld/client.ReadAttempt), not after its whole timeout.
func (f *faultSite) freezeReplica(t *testing.T, r *replica) {
	t.Helper()
	f.pushMu.Lock()
	before := f.pushes.Load()
	if err := r.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		f.pushMu.Unlock()
		t.Fatal(err)
	}
	defer r.proc.cmd.Process.Signal(syscall.SIGCONT)
	f.pushMu.Unlock()
	f.waitPushes(t, before, 1, r.name+" frozen")
	took := time.Duration(f.lastPush.Load())
	t.Logf("%s frozen: a push took %v", r.name, took.Round(time.Millisecond))
	if took > client.ReadAttempt+15*time.Second {
		t.Errorf("with %s frozen a push took %v; want it past the frozen replica after %v", r.name, took, client.ReadAttempt)
	}
}

// TestRestartOnTakenPort: a daemon restarted on its first port while another socket
// holds it is started again until the port is free.
func TestRestartOnTakenPort(t *testing.T) {
	work := t.TempDir()
	args := []string{"controld", "--data-dir", filepath.Join(work, "controld"), "--store", filepath.Join(work, "store")}
	log := filepath.Join(work, "controld.log")
	p, fields := startAnnounced(t, nil, log, "controld listening", append(args, "--listen", "127.0.0.1:0")...)
	p.kill(t)
	taken, err := net.Listen("tcp", fields["addr"])
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(1200*time.Millisecond, func() { taken.Close() })
	p, again := startAnnounced(t, nil, log, "controld listening", append(args, "--listen", fields["addr"])...)
	if again["addr"] != fields["addr"] {
		t.Fatalf("restarted on %s; want %s", again["addr"], fields["addr"])
	}
	data, _ := os.ReadFile(log)
	if n := strings.Count(string(data), "address already in use"); n < 2 {
		t.Fatalf("the restart found the port taken %d times; want at least 2 (the test holds it 1.2 s):\n%s", n, data)
	}
}
