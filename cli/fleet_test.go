package cli_test

// The fleet of issue #31: two controld replicas on PostgreSQL, three edges sharing
// their ACME certificates through controld, an S3 store, Varnish in front of the edges
// purged by webhooks, every one a real process on loopback, each on ports the kernel
// chose. A pipeline pushes and apt clients loop, over https through a balancer in front
// of the edges (checking their /readyz) and over http through Varnish, while each
// edge, each replica and PostgreSQL are killed (SIGKILL) in turn and started again.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/acmetest"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/cdntest"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

const (
	fleetHost = "apt.fleet-cdn.test"
	// fleetPhase is how long each fault's phase lasts at least (the kill, the time
	// down, the restart, then steady load): six phases make the few minutes of the test.
	fleetPhase = 20 * time.Second
)

// fleet is the deployment under test.
type fleet struct {
	t                *testing.T
	work, store, db  string
	admin, edgeToken string
	pg               *pgtest.Server
	replicas         [2]*replica
	controldURLs     string
	edges            [3]*fleetEdge
	project          *project
	peb              *acmetest.Pebble
	pushMu           sync.Mutex // held by each push; the faults hold it to wait for one
	acked            []string   // release ids of the pushes that succeeded, under pushMu
	pushes           atomic.Int64
	pushFails        atomic.Int64
	next             int // the next package version, under pushMu
	faults           []fault
	hookedAfter      int // activations made before the purger's hook was added
}

// fleetEdge is an edged process on kernel-chosen ports, which it keeps across restarts
// (its config file is rewritten with them after the first start).
type fleetEdge struct {
	announced
	config             string
	plain, admin, tls  string
	servedAfterRestart time.Duration
}

// fault is one kill: what was killed, when, and when it served (or took pushes) again.
type fault struct {
	what             string
	edge             bool
	killed, restored time.Time
}

func (f *fleet) startReplica(r *replica) {
	t := f.t
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

// writeEdgeConfig writes e's edged.toml: its addresses (127.0.0.1:0 before the first
// start), both replicas (its own first), the store, and HTTPS by pebble with the
// certificates kept in controld.
func (f *fleet) writeEdgeConfig(e *fleetEdge, controld string) {
	f.t.Helper()
	addr := func(a string) string {
		if a == "" {
			return "127.0.0.1:0"
		}
		return a
	}
	cfg := fmt.Sprintf("listen = %q\nadmin_listen = %q\ntls_listen = %q\ncontrold = %q\nstore = %q\nstate_dir = %q\n"+
		"acme_ca = %q\nacme_ca_root = %q\nacme_email = \"ops@fleet.test\"\nacme_storage = \"controld\"\nacme_lock_ttl = \"5s\"\n"+
		"[poll]\nbackoff_max = \"2s\"\n",
		addr(e.plain), addr(e.admin), addr(e.tls), controld, f.store, filepath.Join(f.work, e.name), f.peb.Dir, f.peb.CAFile)
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// startEdge starts e and waits until it is ready (/readyz); the first start learns its
// addresses from the log.
func (f *fleet) startEdge(e *fleetEdge) {
	f.t.Helper()
	var fields map[string]string
	e.proc, fields = startAnnounced(f.t, []string{"ARMOR_EDGE_TOKEN=" + f.edgeToken}, e.log, "edged listening",
		"edged", "--config-file", e.config)
	if e.addrs == nil {
		e.addrs = fields
		e.plain, e.admin, e.tls = fields["listen"], fields["admin"], fields["tls"]
		if e.tls == "" {
			f.t.Fatalf("%s announced no HTTPS listener: %v", e.name, fields)
		}
	}
	waitHTTP(f.t, "http://"+e.admin+"/readyz")
}

// push builds a release with the next version of the pipeline's package and pushes it,
// again and again while it fails (a push that died mid-way is finished by the next try,
// idempotently); it records the release id once a push succeeded.
func (f *fleet) push(loop *aptLoop) {
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	f.next++
	deb, err := synth.WriteOne(filepath.Join(f.project.dir, "debs"), "fleet-hello", fmt.Sprintf("1.%d-1", f.next), "amd64", "")
	if err != nil {
		f.t.Error(err)
		return
	}
	loop.published(f.t, deb)
	var id string
	for try := 0; ; try++ {
		out, err := armorCall(f.project.dir, "build", "--json")
		if err == nil {
			id = releaseID(out)
			if out, err = armorCall(f.project.dir, "push"); err == nil && strings.Contains(out, "recorded and activated") {
				break
			}
		}
		f.pushFails.Add(1)
		if try == 60 {
			f.t.Errorf("push of fleet-hello 1.%d failed 60 times: %v\n%s", f.next, err, out)
			return
		}
		time.Sleep(time.Second)
	}
	f.acked = append(f.acked, id)
	f.pushes.Add(1)
}

// waitPush waits until a push that started after now has succeeded.
func (f *fleet) waitPush(why string) {
	f.t.Helper()
	n := f.pushes.Load()
	deadline := time.Now().Add(90 * time.Second)
	for f.pushes.Load() < n+2 {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: no push succeeded within 90s (%d failed tries so far)", why, f.pushFails.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPushFails waits until a push has failed (the database is down).
func (f *fleet) waitPushFails(why string) {
	f.t.Helper()
	n := f.pushFails.Load()
	deadline := time.Now().Add(60 * time.Second)
	for f.pushFails.Load() < n+2 {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: no push failed within 60s", why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServesLast waits until edge e serves the release pushed last.
func (f *fleet) waitServesLast(e *fleetEdge) {
	f.t.Helper()
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	waitServed(f.t, e.plain, fleetHost, f.project.tree())
}

// phase runs one fault: kill, then restore (restart and wait until it serves or takes
// pushes again), then steady load until the phase has lasted fleetPhase.
func (f *fleet) phase(what string, edge bool, kill, restore func()) {
	f.t.Helper()
	start := time.Now()
	kill()
	restore()
	f.faults = append(f.faults, fault{what: what, edge: edge, killed: start, restored: time.Now()})
	time.Sleep(time.Until(start.Add(fleetPhase)))
}

// TestFleet runs the fleet for a few minutes of faults and reports what the clients
// saw: apt requests, errors, hash-sum mismatches, releases lost, certificate orders.
func TestFleet(t *testing.T) {
	pg := pgtest.Start(t)
	s3 := s3test.Start(t)
	work := t.TempDir()
	f := &fleet{t: t, work: work, pg: pg, db: deployDatabase(t, pg), store: s3.Remote("armor", "fleet")}
	f.admin = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--database", f.db, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	f.edgeToken = strings.TrimSpace(armor(t, work, nil, "controld", "token", "--database", f.db, "edge",
		"--for", "*", "--action", "read", "--action", "certs"))
	var urls []string
	for i := range f.replicas {
		r := &replica{announced: announced{name: fmt.Sprintf("controld-%c", 'a'+i), log: filepath.Join(work, fmt.Sprintf("controld-%c.log", 'a'+i))}}
		f.startReplica(r)
		f.replicas[i] = r
		urls = append(urls, r.url)
	}
	f.controldURLs = strings.Join(urls, ",")

	// The repository, its first release.
	p := &project{dir: filepath.Join(work, "fleet"), name: "fleet", host: fleetHost}
	f.project = p
	armor(t, work, nil, "init", "--dir", p.dir, "--name", p.name, "--hostname", fleetHost,
		"--key-algo", "eddsa", "--store", f.store, "--controld", f.controldURLs)
	t.Setenv("ARMOR_TOKEN", f.admin) // for the pushes, made in this process
	armor(t, p.dir, nil, "repos", "create")
	loop := newAptLoop()
	git(t, p.dir, "init", "-q")
	f.push(loop)

	// Three edges, HTTPS by pebble, certificates shared through controld. The CA's
	// validations and the https clients reach them through balancers (made first: pebble
	// needs their ports, the edges pebble's address), told the edges' addresses once
	// they announced them.
	httpLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	tlsLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	f.peb = acmetest.Start(t, acmetest.Options{HTTPPort: httpLB.Port, TLSPort: tlsLB.Port})
	_, rootPEM := f.peb.Root(t)
	caFile := filepath.Join(work, "pebble-root.pem")
	if err := os.WriteFile(caFile, rootPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	var plains, tlss []string
	for i := range f.edges {
		e := &fleetEdge{announced: announced{name: fmt.Sprintf("edged-%d", i), log: filepath.Join(work, fmt.Sprintf("edged-%d.log", i))},
			config: filepath.Join(work, fmt.Sprintf("edged-%d.toml", i))}
		f.edges[i] = e
		controld := urls[i%2] + "," + urls[(i+1)%2]
		f.writeEdgeConfig(e, controld)
		f.startEdge(e)
		f.writeEdgeConfig(e, controld) // its addresses, for the restarts
		plains, tlss = append(plains, e.plain), append(tlss, e.tls)
	}
	httpLB.SetBackends(plains...)
	tlsLB.SetBackends(tlss...)
	// They send clients only to the edges whose /readyz answers 200, as the deployment's
	// balancer does (README).
	plainReady, tlsReady := map[string]string{}, map[string]string{}
	for _, e := range f.edges {
		plainReady[e.plain], tlsReady[e.tls] = "http://"+e.admin+"/readyz", "http://"+e.admin+"/readyz"
	}
	httpLB.Check(t, plainReady, 250*time.Millisecond)
	tlsLB.Check(t, tlsReady, 250*time.Millisecond)

	// The certificate, ordered at the first handshake (through the balancer, so any edge),
	// before the faults: an edge killed while it orders is another story (see
	// TestSharedCertificates).
	roots, _ := f.peb.Root(t)
	lb := &httpsEdge{tls: tlsLB.Addr}
	if _, err := lb.leaf(fleetHost, roots); err != nil {
		t.Fatalf("first handshake through the balancer: %v\npebble:\n%s", err, f.peb.Output())
	}

	// Varnish in front of the edges, purged by the purger at each activation. The hook
	// is registered at an address that is the purger's once it started: a forwarder, as
	// a load balancer in front of purgers would be.
	cdn := cdntest.Start(t, "../configs/cdn/varnish.vcl", plains, fleetHost, "/dists/stable/InRelease")
	purgerLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	secretFile := filepath.Join(work, "purger.secret")
	f.hookedAfter = len(f.history())
	secret := armor(t, p.dir, nil, "hooks", "add", "http://"+purgerLB.Addr+"/", "--event", "activate", "--event", "rollback")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	purger := []string{"cdn", "purger", "--listen", "127.0.0.1:0", "--purge-url", cdn.URL, "--secret-file", secretFile, "--wait", "10s"}
	for _, e := range f.edges {
		purger = append(purger, "--edge", "http://"+e.admin)
	}
	_, fields := startAnnounced(t, nil, filepath.Join(work, "purger.log"), "cdn purger listening", purger...)
	purgerLB.SetBackends(fields["addr"])

	// The load: a pipeline, two apt clients over https through the balancer, two over
	// http through Varnish.
	httpsProxy, _ := acmetest.ConnectProxy(t, tlsLB.Addr)
	source := []apttest.Source{{URI: "https://" + fleetHost + "/", Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: p.keyring()}}
	plainSource := []apttest.Source{{URI: "http://" + fleetHost + "/", Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: p.keyring()}}
	for i := range 2 {
		loop.start(t, fmt.Sprint("https", i), apttest.Options{Sources: source,
			Extra: []string{"Acquire::https::Proxy=http://" + httpsProxy, "Acquire::https::CaInfo=" + caFile}}, "fleet-hello")
		loop.start(t, fmt.Sprint("varnish", i), apttest.Options{Sources: plainSource, Proxy: cdn.URL}, "fleet-hello")
	}
	stop := make(chan struct{})
	var pipeline sync.WaitGroup
	pipeline.Add(1)
	go func() {
		defer pipeline.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.push(loop)
		}
	}()
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			pipeline.Wait()
			loop.finish()
		}
	}
	t.Cleanup(stopLoad)

	// The faults, in turn: each edge, each replica, PostgreSQL.
	start := time.Now()
	f.waitPush("before the faults")
	for _, e := range f.edges {
		f.phase(e.name, true, func() {
			e.proc.kill(t)
			f.waitPush(e.name + " down")
		}, func() {
			restarted := time.Now()
			f.startEdge(e)
			f.waitServesLast(e)
			e.servedAfterRestart = time.Since(restarted).Round(time.Millisecond)
		})
	}
	for _, r := range f.replicas {
		f.phase(r.name, false, func() {
			r.proc.kill(t)
			f.waitPush(r.name + " down")
		}, func() {
			f.startReplica(r)
			f.waitPush(r.name + " back")
		})
	}
	f.phase("PostgreSQL", false, func() {
		pg.Kill()
		f.waitPushFails("PostgreSQL down")
	}, func() {
		if err := pg.Restart(); err != nil {
			t.Fatalf("restart PostgreSQL: %v", err)
		}
		f.waitPush("PostgreSQL back")
	})
	faults := time.Since(start)
	stopLoad()
	f.report(loop, faults, tlsLB, cdn)
}

// report logs the figures of the run and fails the test on what must not happen.
func (f *fleet) report(loop *aptLoop, faults time.Duration, tlsLB *acmetest.Balancer, cdn *cdntest.Varnish) {
	t := f.t
	lost := f.lostReleases()
	orders := f.peb.Orders()
	delivered, failed, activations := f.hookDeliveries()
	met, explained, unexplained := f.explain(loop)
	var down []string
	for _, ft := range f.faults {
		down = append(down, fmt.Sprintf("%s %v", ft.what, ft.restored.Sub(ft.killed).Round(100*time.Millisecond)))
	}
	var caughtUp []string
	for _, e := range f.edges {
		caughtUp = append(caughtUp, fmt.Sprintf("%s %v", e.name, e.servedAfterRestart))
	}
	t.Logf("fleet: %v under faults, each killed (SIGKILL) once and restarted: %s", faults.Round(time.Second), strings.Join(down, ", "))
	t.Logf("fleet: pushes: %d acknowledged, %d tries failed and were retried; releases lost: %d", f.pushes.Load(), f.pushFails.Load(), len(lost))
	t.Logf("fleet: apt (2 clients over https through the balancer, 2 through Varnish): %s", loop.report())
	t.Logf("fleet: %d apt runs were under way when an edge was killed; apt runs that failed: %d of those, %d others",
		met, len(explained), len(unexplained))
	for _, r := range explained {
		t.Logf("fleet:   %s", r)
	}
	vc, err := cdn.Counters()
	if err != nil {
		t.Error(err)
	}
	t.Logf("fleet: the balancer sent %d https connections to another edge than the one it picked (not ready, or refusing); "+
		"Varnish answered %d requests from its cache, fetched %d from the edges and retried %d of those on another edge",
		tlsLB.Redispatched(), vc["MAIN.cache_hit"], vc["MAIN.backend_req"], vc["MAIN.backend_retry"])
	t.Logf("fleet: certificate orders: %d; https connections per edge: %v", orders, tlsLB.Sent())
	t.Logf("fleet: webhook deliveries: %d delivered, %d failed, for %d activations; restarted edges served the last push after %s",
		delivered, failed, activations, strings.Join(caughtUp, ", "))

	if loop.mismatches != 0 {
		t.Errorf("%d hash-sum mismatches", loop.mismatches)
	}
	for _, r := range unexplained {
		t.Errorf("an apt run failed that no edge's death explains: %s", r)
	}
	if loop.updates < 20 || loop.downloads < 10 {
		t.Errorf("too few apt runs to mean anything: %s", loop.report())
	}
	if len(lost) != 0 {
		t.Errorf("acknowledged releases lost: %v", lost)
	}
	if orders != 1 {
		t.Errorf("%d certificate orders for one hostname on three edges; want 1", orders)
	}
	if failed != 0 || delivered < activations {
		t.Errorf("webhook deliveries: %d delivered, %d failed, for %d activations", delivered, failed, activations)
	}
}

// explain sorts the failed apt runs: a run that was under way when an edge was killed
// may fail (its connection may have gone with the edge, and apt does not retry every
// failure);
// Varnish and the balancer send every later request to the living edges. Any other
// failure, and any failure while a replica or PostgreSQL was down (the edges serve
// from what they have), is unexplained. met counts the runs under way at an edge's
// kill, failed or not.
func (f *fleet) explain(loop *aptLoop) (met int, explained, unexplained []string) {
	loop.mu.Lock()
	defer loop.mu.Unlock()
	for _, r := range loop.runs {
		why := ""
		for _, ft := range f.faults {
			if ft.edge && !r.start.After(ft.killed) && !r.end.Before(ft.killed) {
				why = ft.what + " killed during the run"
			}
		}
		if why != "" {
			met++
		}
		if len(r.problems) == 0 {
			continue
		}
		line := fmt.Sprintf("%s %s at %s (%v): %s", r.client, r.what, r.start.Format("15:04:05.000"),
			r.end.Sub(r.start).Round(time.Millisecond), strings.Join(r.problems, "; "))
		if why == "" {
			unexplained = append(unexplained, line)
		} else {
			explained = append(explained, line+" ← "+why)
		}
	}
	return met, explained, unexplained
}

// lostReleases returns the acknowledged pushes that controld does not have recorded,
// or whose activation is not in the history.
func (f *fleet) lostReleases() []string {
	f.t.Helper()
	ctx := context.Background()
	cl := client.New(f.controldURLs, f.admin, nil)
	rels, err := cl.Releases(ctx, f.project.name)
	if err != nil {
		f.t.Fatal(err)
	}
	activated := map[string]bool{}
	for _, a := range f.history() {
		activated[a.To] = true
	}
	var lost []string
	f.pushMu.Lock()
	defer f.pushMu.Unlock()
	for _, id := range f.acked {
		if !slices.ContainsFunc(rels, func(r api.Release) bool { return r.ID == id }) || !activated[id] {
			lost = append(lost, shortID(id))
		}
	}
	return lost
}

// hookDeliveries counts the purger's webhook deliveries once none is pending, and the
// activations they are for.
func (f *fleet) hookDeliveries() (delivered, failed, activations int) {
	f.t.Helper()
	activations = len(f.history()) - f.hookedAfter
	cl := client.New(f.controldURLs, f.admin, nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ds, err := cl.Deliveries(context.Background(), "", 10000)
		if err != nil {
			f.t.Fatal(err)
		}
		delivered, failed = 0, 0
		pending := 0
		for _, d := range ds {
			switch d.State {
			case "delivered":
				delivered++
			case "failed":
				failed++
			default:
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			return delivered, failed, activations
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// history is the repository's activations.
func (f *fleet) history() []api.Activation {
	f.t.Helper()
	hist, err := client.New(f.controldURLs, f.admin, nil).History(context.Background(), f.project.name)
	if err != nil {
		f.t.Fatal(err)
	}
	return hist
}

// armorCall runs an armor command on the project in this process (cli.Main) and returns
// its output, or an error with everything it said.
func armorCall(project string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	if code := cli.Main(append([]string{"-c", filepath.Join(project, "armor.toml")}, args...), &stdout, &stderr); code != 0 {
		return stdout.String() + stderr.String(), fmt.Errorf("armor %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// releaseID reads the release id of armor build --json.
func releaseID(out string) string {
	var res struct {
		Release string `json:"release"`
	}
	_ = json.Unmarshal([]byte(out), &res)
	return res.Release
}
