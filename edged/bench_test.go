package edged

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/armor-apt/armor/store"
)

// Benchmarks. The in-process ones run anywhere:
//
//	go test ./edged -run '^$' -bench 'Handler' -benchmem
//
// BenchmarkVsNginx compares edged with nginx serving the same tree, each measured
// with wrk -t1 -c32 -d5s (about 40 s in all; it needs nginx and wrk, see
// .ci/install-deps):
//
//	go test ./edged -run '^$' -bench VsNginx -benchtime 1x
//
// On a shared VM, the speed of both servers drifts by tens of percent within a minute,
// so one run of each says little. ARMOR_BENCH_ROUNDS=N measures each object in N
// rounds: a round runs both servers back to back, in alternating order, so the drift
// hits both about alike. The benchmark reports each server's median req/s and p99, the
// median and range of the N paired ratios, and each server's p99 over the requests of
// all its rounds pooled (wrk prints its latency histogram through a Lua script);
// ARMOR_BENCH_DURATION (a wrk duration, default 5s) sets each run's length. For
// example, 10 rounds of 2 s:
//
//	ARMOR_BENCH_ROUNDS=10 ARMOR_BENCH_DURATION=2s go test ./edged -run '^$' -bench VsNginx -benchtime 1x -v
//
// Client and server each get a core of their own: the server under test is pinned to
// CPU 0 (nginx with one worker, edged with GOMAXPROCS=1) and wrk to CPU 1. Unpinned,
// three busy threads (two server threads and wrk) would share two cores, and the
// servers' latency tails would mostly measure how long a runnable thread waits for a
// core. Nor would the servers get the same share: under wrk -c32, nginx's second
// worker accepted none of the connections (its CPU time stayed 0), so nginx ran as
// one busy process while edged spread over two threads that competed with wrk.
//
// Pinned, each round of a small object also runs a ceiling server (ceilingServer): it
// answers every request with the bytes of edged's response and does nothing else. Its
// req/s is the most wrk and the kernel allow for that response, so nginx's and edged's
// fractions of it show how close each came to the client's limit. wrk's own core is
// nearly busy at edged's rates, so when that core runs slow on the VM, edged's ratio to
// nginx falls while nginx's rate does not.
//
// ARMOR_BENCH_PIN=0 runs everything unpinned, and ARMOR_BENCH_PROCS=N (default 1
// pinned, 2 unpinned) sets nginx's workers and edged's GOMAXPROCS.
// ARMOR_BENCH_POLLER=edged measures edged with its connections in its opt-in poller
// (conn_poller = "edged", package connpoll) instead of Go's, for an A/B of the two;
// docs/benchmarks.md has the loop that runs one.
//
// It reports req/s and p99 (µs) per object for both servers, and the cold-miss
// throughput of edged reading from a local-directory rclone store.

// benchTree is the benchmark repository: a ~2 KiB InRelease, a ~2.7 MB Packages.gz of
// incompressible bytes, and a ~4 KiB .deb.
func benchTree() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var in strings.Builder
	in.WriteString("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: bench\nSuite: stable\nSHA256:\n")
	for in.Len() < 2048-80 {
		fmt.Fprintf(&in, " %x %d main/binary-amd64/Packages\n", random(32), rng.IntN(1<<20))
	}
	return map[string][]byte{
		"dists/stable/InRelease":                     []byte(in.String()),
		"dists/stable/main/binary-amd64/Packages.gz": random(2_700_000),
		"pool/main/h/hello/hello_1_amd64.deb":        random(4096),
	}
}

// ceilingMax is the largest object the benchmark measures the ceiling for (see
// ceilingServer): a response it writes must fit an empty socket buffer.
const ceilingMax = 64 << 10

var benchPaths = []struct{ name, path string }{
	{"InRelease-2KiB", "dists/stable/InRelease"},
	{"deb-4KiB", "pool/main/h/hello/hello_1_amd64.deb"},
	{"Packages.gz-2.7MB", "dists/stable/main/binary-amd64/Packages.gz"},
}

// benchEdge is an edge serving tree from store, warm unless cold.
func benchEdge(b *testing.B, cas *testStore, tree map[string][]byte, warm bool) (*testEdge, *rel) {
	b.Helper()
	ctl := newFakeControld(b)
	r := makeRelease(b, cas, "bench", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("bench", []string{hostA}, r))
	cfg := testConfig(b, ctl)
	cfg.CacheSize = 512 * MiB
	cfg.StreamThreshold = 8 * MiB
	if p := os.Getenv("ARMOR_BENCH_POLLER"); p != "" {
		cfg.ConnPoller = p // "go" (the default) or "edged": the A/B of the connection poller
	}
	e := startEdge(b, cfg, cas)
	e.waitVersion(b, v)
	if warm {
		for p := range tree {
			if code, _ := getStatus(e.addr, hostA, "/"+p); code != 200 {
				b.Fatalf("warming %s: status %d", p, code)
			}
		}
	}
	return e, r
}

// BenchmarkHandler measures the hot path in process: a cached object, no network.
func BenchmarkHandler(b *testing.B) {
	cas := newTestStore()
	e, _ := benchEdge(b, cas, benchTree(), true)
	for _, bp := range benchPaths {
		b.Run(bp.name, func(b *testing.B) {
			var req fasthttp.Request
			req.Header.SetMethod("GET")
			req.SetRequestURI("/" + bp.path)
			req.Header.SetHost(hostA)
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				e.handle(&ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d", ctx.Response.StatusCode())
				}
			}
		})
	}
}

// BenchmarkVsNginx: see the comment at the top of this file.
func BenchmarkVsNginx(b *testing.B) {
	for _, tool := range []string{"/usr/sbin/nginx", "wrk"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s not found: run .ci/install-deps", tool)
		}
	}
	tree := benchTree()
	root := b.TempDir()
	for p, data := range tree {
		full := filepath.Join(root, "www", p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	pin := os.Getenv("ARMOR_BENCH_PIN") != "0"
	if pin && runtime.NumCPU() < 2 {
		b.Logf("one CPU: client and server run unpinned")
		pin = false
	}
	procs := 2
	if pin {
		procs = 1
	}
	if n, err := strconv.Atoi(os.Getenv("ARMOR_BENCH_PROCS")); err == nil && n > 0 {
		procs = n
	}
	var serverCPU, clientCPU []string
	if pin {
		serverCPU, clientCPU = []string{"taskset", "-c", "0"}, []string{"taskset", "-c", "1"}
	}
	nginxAddr := startNginx(b, root, procs, serverCPU)
	rc, err := store.OpenRclone(context.Background(), filepath.Join(root, "store"))
	if err != nil {
		b.Fatal(err)
	}
	cas := &testStore{Store: rc, opens: map[string]int{}}
	edge, _ := benchEdge(b, cas, tree, true)

	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("ARMOR_BENCH_ROUNDS")); err == nil && n > 1 {
		rounds = n
	}
	duration := "5s"
	if d := os.Getenv("ARMOR_BENCH_DURATION"); d != "" {
		duration = d
	}
	wrk := wrkRunner{cpu: clientCPU, host: hostA, duration: duration, script: filepath.Join(root, "histogram.lua")}
	if err := os.WriteFile(wrk.script, []byte(wrkHistogramScript), 0o644); err != nil {
		b.Fatal(err)
	}
	runEdged := func(path string) wrkResult {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		if pin {
			defer pinProcess(b, 0)()
		}
		return wrk.run(b, edge.addr, path)
	}
	for _, bp := range benchPaths {
		path := "/" + bp.path
		var ng, ed, ceil []wrkResult
		runs := []func(){
			func() { ng = append(ng, wrk.run(b, nginxAddr, path)) },
			func() { ed = append(ed, runEdged(path)) },
		}
		if pin && len(tree[bp.path]) <= ceilingMax {
			cs := startCeiling(b, edge.addr, hostA, path)
			runs = append(runs, func() {
				defer pinProcess(b, 0)()
				cs.start()
				defer cs.stopServing()
				ceil = append(ceil, wrk.run(b, cs.addr, path))
			})
		}
		for i := range rounds {
			// Each round starts with the next server, so none always runs first.
			for j := range runs {
				runs[(i+j)%len(runs)]()
			}
		}
		c := comparePaired(ng, ed)
		b.ReportMetric(c.nginx.rps, bp.name+"-nginx-req/s")
		b.ReportMetric(c.edged.rps, bp.name+"-edged-req/s")
		b.ReportMetric(c.nginx.p99.Seconds()*1e6, bp.name+"-nginx-p99-µs")
		b.ReportMetric(c.edged.p99.Seconds()*1e6, bp.name+"-edged-p99-µs")
		b.ReportMetric(c.ratio, bp.name+"-edged/nginx")
		b.Logf("%-18s nginx %9.0f req/s p99 %8s | edged %9.0f req/s p99 %8s | edged/nginx %.2f× (%.2f–%.2f), p99 no worse in %d of %d (%d procs, pinned %t)",
			bp.name, c.nginx.rps, c.nginx.p99, c.edged.rps, c.edged.p99, c.ratio, c.minRatio, c.maxRatio,
			c.p99NoWorse, rounds, procs, pin)
		if ceil != nil {
			var cr, fn, fe []float64
			for i, r := range ceil {
				cr = append(cr, r.rps)
				fn = append(fn, ng[i].rps/r.rps)
				fe = append(fe, ed[i].rps/r.rps)
			}
			b.ReportMetric(median(cr), bp.name+"-ceiling-req/s")
			b.Logf("%-18s ceiling (a server that only writes edged's response) %.0f req/s: nginx at %.0f%% of it, edged at %.0f%%",
				"", median(cr), 100*median(fn), 100*median(fe))
		}
		if rounds > 1 {
			b.ReportMetric(c.nginx.pooledP99.Seconds()*1e6, bp.name+"-nginx-pooled-p99-µs")
			b.ReportMetric(c.edged.pooledP99.Seconds()*1e6, bp.name+"-edged-pooled-p99-µs")
			b.Logf("%-18s p99 of all %d rounds' requests pooled: nginx %s, edged %s", "", rounds, c.nginx.pooledP99, c.edged.pooledP99)
		}
	}
	rps, mbps := coldMisses(b, rc)
	b.ReportMetric(rps, "cold-miss-req/s")
	b.ReportMetric(mbps, "cold-miss-MB/s")
	b.Logf("cold misses from a local-directory store: %.0f req/s, %.1f MB/s (4 KiB objects, 32 clients)", rps, mbps)
}

// startNginx runs nginx (procs workers, sendfile) over root/www on a free loopback port,
// under the command prefix cpu (taskset, or none).
func startNginx(b *testing.B, root string, procs int, cpu []string) string {
	b.Helper()
	addr := freeAddr(b)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes %[4]d;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 10000000;
	client_body_temp_path %[2]s/tmp-body;
	proxy_temp_path %[2]s/tmp-proxy;
	fastcgi_temp_path %[2]s/tmp-fastcgi;
	uwsgi_temp_path %[2]s/tmp-uwsgi;
	scgi_temp_path %[2]s/tmp-scgi;
	types { application/gzip gz; application/vnd.debian.binary-package deb; }
	default_type text/plain;
	server {
		listen %[3]s;
		root %[2]s/www;
	}
}
`, user, root, addr, procs)
	confPath := filepath.Join(root, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	args := slices.Concat(cpu, []string{"/usr/sbin/nginx", "-e", filepath.Join(root, "error.log"), "-p", root, "-c", confPath})
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("start nginx: %v", err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := getStatus(addr, hostA, "/"+benchPaths[0].path); code == 200 {
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(root, "error.log"))
			b.Fatalf("nginx did not serve on %s within 10s:\n%s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wrkResult is one wrk run: its req/s and its latency histogram.
type wrkResult struct {
	rps  float64
	hist latencyHistogram
}

// paired sums up rounds of the two servers measured back to back: for each server its
// median req/s, its median p99 and its p99 over the requests of all its rounds pooled;
// the median and range of the rounds' edged/nginx req/s; and in how many rounds
// edged's p99 was no worse than nginx's.
//
// A round's p99 is set by its slowest 1% of requests, and on a shared VM those are
// mostly the ones that met a stall of the machine; a 2 s round holds a few of them,
// so its p99 swings by a factor of two from one round to the next. The pooled p99 is
// the p99 of every request each server answered while the two took turns: the same
// figure one long run would give, with the machine's drift shared alike.
type paired struct {
	nginx, edged              summary
	ratio, minRatio, maxRatio float64
	p99NoWorse                int
}

type summary struct {
	rps            float64
	p99, pooledP99 time.Duration
}

func comparePaired(ng, ed []wrkResult) paired {
	var c paired
	var ratios []float64
	for i := range ng {
		ratios = append(ratios, ed[i].rps/ng[i].rps)
		if ed[i].hist.percentile(99) <= ng[i].hist.percentile(99) {
			c.p99NoWorse++
		}
	}
	c.nginx, c.edged = summarize(ng), summarize(ed)
	c.ratio, c.minRatio, c.maxRatio = median(ratios), slices.Min(ratios), slices.Max(ratios)
	return c
}

func summarize(runs []wrkResult) summary {
	var rps []float64
	var p99 []time.Duration
	all := latencyHistogram{}
	for _, r := range runs {
		rps = append(rps, r.rps)
		p99 = append(p99, r.hist.percentile(99))
		all.add(r.hist)
	}
	return summary{rps: median(rps), p99: median(p99), pooledP99: all.percentile(99)}
}

// latencyHistogram counts requests by latency in whole microseconds, as wrk records
// them.
type latencyHistogram map[int64]int64

func (h latencyHistogram) add(o latencyHistogram) {
	for us, n := range o {
		h[us] += n
	}
}

// percentile returns the smallest latency at or below which at least p percent of
// the requests fall (0 for an empty histogram).
func (h latencyHistogram) percentile(p float64) time.Duration {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	keys := slices.Sorted(maps.Keys(h))
	need := int64(math.Ceil(float64(total) * p / 100))
	var seen int64
	for _, us := range keys {
		if seen += h[us]; seen >= need {
			return time.Duration(us) * time.Microsecond
		}
	}
	return time.Duration(keys[len(keys)-1]) * time.Microsecond
}

// parseLatencyHistogram reads the line wrkHistogramScript prints: "latency-histogram"
// and then µs:count pairs.
func parseLatencyHistogram(out []byte) (latencyHistogram, error) {
	_, rest, ok := bytes.Cut(out, []byte("latency-histogram"))
	if !ok {
		return nil, errors.New("no latency-histogram line")
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	h := latencyHistogram{}
	for _, f := range strings.Fields(string(line)) {
		v, n, ok := strings.Cut(f, ":")
		us, err1 := strconv.ParseInt(v, 10, 64)
		count, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil || us < 0 || count < 0 {
			return nil, fmt.Errorf("latency-histogram entry %q: want µs:count", f)
		}
		h[us] += count
	}
	return h, nil
}

// wrkHistogramScript makes wrk print its latency histogram after the run. wrk keeps
// one count per microsecond value; latency(i) is the i-th value that has requests,
// and its count.
const wrkHistogramScript = `done = function(summary, latency, requests)
  local t = {}
  for i = 1, #latency do
    local v, c = latency(i)
    t[#t + 1] = string.format("%d:%d", v, c)
  end
  io.write("latency-histogram ", table.concat(t, " "), "\n")
end
`

// median of a non-empty slice; the mean of the middle two when it has an even length.
func median[T float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// wrkRunner runs wrk -t1 -c32 for duration under the command prefix cpu
// (taskset, or none), with script printing the latency histogram.
type wrkRunner struct {
	cpu                    []string
	host, duration, script string
}

func (w wrkRunner) run(b *testing.B, addr, path string) wrkResult {
	b.Helper()
	args := slices.Concat(w.cpu, []string{"wrk", "-t1", "-c32", "-d" + w.duration,
		"-s", w.script, "-H", "Host: " + w.host, "http://" + addr + path})
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "Non-2xx") || strings.Contains(string(out), "Socket errors") {
		b.Fatalf("wrk saw errors against %s%s:\n%s", addr, path, out)
	}
	rps := wrkRPS.FindSubmatch(out)
	if rps == nil {
		b.Fatalf("cannot read wrk output:\n%s", out)
	}
	var r wrkResult
	r.rps, _ = strconv.ParseFloat(string(rps[1]), 64)
	if r.hist, err = parseLatencyHistogram(out); err != nil {
		b.Fatalf("wrk's latency histogram: %v\n%s", err, out)
	}
	return r
}

// coldMisses measures edged answering only misses: 4000 distinct 4 KiB pool files in a
// local-directory rclone store, fetched once each by 32 concurrent clients from an edge
// with an empty cache.
func coldMisses(b *testing.B, rc store.Store) (reqPerSec, mbPerSec float64) {
	b.Helper()
	const n, size = 4000, 4096
	rng := rand.New(rand.NewPCG(3, 4))
	tree := map[string][]byte{"dists/stable/InRelease": []byte("cold\n")}
	var paths []string
	for i := range n {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := fmt.Sprintf("pool/main/c/cold/cold_%d_amd64.deb", i)
		tree[p] = data
		paths = append(paths, "/"+p)
	}
	edge, _ := benchEdge(b, &testStore{Store: rc, opens: map[string]int{}}, tree, false)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true}}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				req, _ := http.NewRequest("GET", "http://"+edge.addr+paths[i], nil)
				req.Host = hostA
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				buf := make([]byte, size+1)
				m, _ := resp.Body.Read(buf)
				for m < size+1 {
					k, err := resp.Body.Read(buf[m:])
					m += k
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || m != size {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if failed.Load() > 0 {
		b.Fatalf("%d cold requests failed", failed.Load())
	}
	return float64(n) / d.Seconds(), float64(n*size) / d.Seconds() / 1e6
}

// The pooled p99 that BenchmarkVsNginx reports comes from parsing wrk's histogram
// line and from these sums.
func TestLatencyHistogram(t *testing.T) {
	h, err := parseLatencyHistogram([]byte("Running 2s test\n  99%  412.00us\nlatency-histogram 100:90 250:9 412:1 900:0\nRequests/sec: 1.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 100 * time.Microsecond},
		{90, 100 * time.Microsecond},
		{90.5, 250 * time.Microsecond},
		{99, 250 * time.Microsecond},
		{99.5, 412 * time.Microsecond},
		{100, 412 * time.Microsecond},
	} {
		if got := h.percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	pooled := latencyHistogram{}
	pooled.add(h)
	pooled.add(latencyHistogram{1000: 100})
	if got, want := pooled.percentile(99), 1000*time.Microsecond; got != want {
		t.Errorf("pooled p99 = %v, want %v (half the requests took 1 ms)", got, want)
	}
	if got := (latencyHistogram{}).percentile(99); got != 0 {
		t.Errorf("empty histogram: p99 = %v, want 0", got)
	}
	for _, bad := range []string{"no histogram here", "latency-histogram 100", "latency-histogram 1:x", "latency-histogram -5:1"} {
		if _, err := parseLatencyHistogram([]byte(bad)); err == nil {
			t.Errorf("%q: parsed, want an error", bad)
		}
	}
}

// BenchmarkCleanPath measures request-path cleaning on the hot path: a plain path (no
// copy), and one whose slashes are merged (built in the handler's buffer).
func BenchmarkCleanPath(b *testing.B) {
	for _, p := range []string{"/pool/main/h/hello/hello_1_amd64.deb", "//dists/stable/main/binary-amd64/Packages.gz"} {
		b.Run(strings.ReplaceAll(p, "/", "_"), func(b *testing.B) {
			raw := []byte(p)
			var buf [512]byte
			b.ReportAllocs()
			for b.Loop() {
				if _, _, status := cleanPath(buf[:0], raw); status != 0 {
					b.Fatal(status)
				}
			}
		})
	}
}
