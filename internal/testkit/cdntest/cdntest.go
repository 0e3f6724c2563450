// Package cdntest runs a real Varnish (Debian's varnish; .ci/install-deps installs it)
// on 127.0.0.1 with armor's configs/cdn/varnish.vcl, its backends block replaced by the
// edges of the test: the shipped VCL is what the test runs.
package cdntest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Varnish is a running varnishd.
type Varnish struct {
	URL  string // http://127.0.0.1:port
	Addr string

	cmd   *exec.Cmd
	work  string // its -n directory
	admin string // varnishadm
	done  chan struct{}
	mu    sync.Mutex
	log   bytes.Buffer
}

var backendsBlock = regexp.MustCompile(`(?s)# BEGIN BACKENDS.*# END BACKENDS`)

// binary finds varnishd (in /usr/sbin, which a non-root PATH may lack).
func binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("varnishd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/varnishd"); err == nil {
		return "/usr/sbin/varnishd"
	}
	t.Fatal("varnishd not found: run .ci/install-deps (Debian package varnish)")
	return ""
}

// Start runs varnishd with the VCL at vcl until the test ends, in front of edges (the
// edges' public listeners, host:port), probing each with HEAD of probePath for host.
// It returns once Varnish answers.
func Start(t testing.TB, vcl string, edges []string, host, probePath string) *Varnish {
	t.Helper()
	bin := binary(t)
	src, err := os.ReadFile(vcl)
	if err != nil {
		t.Fatal(err)
	}
	if !backendsBlock.Match(src) {
		t.Fatalf("%s has no # BEGIN BACKENDS ... # END BACKENDS block", vcl)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# BEGIN BACKENDS (the test's edges)\nprobe edge_ready {\n    .request = \"HEAD %s HTTP/1.1\" \"Host: %s\" \"Connection: close\";\n"+
		"    .expected_response = 200;\n    .interval = 500ms;\n    .timeout = 1s;\n    .window = 3;\n    .threshold = 2;\n}\n", probePath, host)
	for i, e := range edges {
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "backend edge%d { .host = %q; .port = %q; .probe = edge_ready; }\n", i+1, h, p)
	}
	b.WriteString("sub vcl_init {\n    new edges = directors.round_robin();\n")
	for i := range edges {
		fmt.Fprintf(&b, "    edges.add_backend(edge%d);\n", i+1)
	}
	b.WriteString("}\n# END BACKENDS")
	dir := t.TempDir()
	file := filepath.Join(dir, "test.vcl")
	if err := os.WriteFile(file, backendsBlock.ReplaceAll(src, []byte(b.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	v := &Varnish{done: make(chan struct{}), work: work, admin: adminBinary(t)}
	// -j none: no privilege separation (the test may run as root or not); -F: in the
	// foreground, so the test owns the process. Its ports are the kernel's choice, read
	// back through the management port.
	v.cmd = exec.Command(bin, "-F", "-j", "none", "-n", work, "-a", "127.0.0.1:0", "-T", "127.0.0.1:0",
		"-f", file, "-s", "malloc,128m", "-p", "thread_pool_min=20", "-p", "thread_pool_max=200")
	w := &lockedWriter{v: v}
	v.cmd.Stdout, v.cmd.Stderr = w, w
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("start varnishd: %v", err)
	}
	go func() { v.cmd.Wait(); close(v.done) }()
	t.Cleanup(func() {
		// The manager and its child share the process group.
		syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		<-v.done
		if t.Failed() {
			t.Logf("varnishd:\n%s", v.Log())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := v.readAddr(work)
		if err == nil {
			var resp *http.Response
			if resp, err = http.Get(v.URL + "/"); err == nil {
				resp.Body.Close()
				return v
			}
		}
		select {
		case <-v.done:
			t.Fatalf("varnishd exited at start:\n%s", v.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("varnishd did not answer within 20s: %v\n%s", err, v.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listenAddress is a line of varnishadm debug.listen_address: name, host, port.
var listenAddress = regexp.MustCompile(`(?m)^\S+ (\S+) ([0-9]+)$`)

// readAddr sets v's address from what varnishd's management port says it listens on.
func (v *Varnish) readAddr(work string) error {
	if v.Addr != "" {
		return nil
	}
	out, err := exec.Command(v.admin, "-n", work, "debug.listen_address").CombinedOutput()
	if err != nil {
		return fmt.Errorf("varnishadm debug.listen_address: %w: %s", err, out)
	}
	m := listenAddress.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("varnishadm debug.listen_address said %q", out)
	}
	v.Addr = net.JoinHostPort(string(m[1]), string(m[2]))
	v.URL = "http://" + v.Addr
	return nil
}

// Counters reads varnishstat's counters (MAIN.client_req, MAIN.backend_retry, ...).
func (v *Varnish) Counters() (map[string]uint64, error) {
	out, err := exec.Command(filepath.Join(filepath.Dir(v.admin), "varnishstat"), "-n", v.work, "-1").Output()
	if err != nil {
		return nil, fmt.Errorf("varnishstat: %w", err)
	}
	c := map[string]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				c[f[0]] = n
			}
		}
	}
	return c, nil
}

// adminBinary finds varnishadm (Debian's varnish ships it beside varnishd).
func adminBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("varnishadm")
	if err != nil {
		t.Fatal("varnishadm not found: run .ci/install-deps (Debian package varnish)")
	}
	return p
}

type lockedWriter struct{ v *Varnish }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.v.mu.Lock()
	defer w.v.mu.Unlock()
	return w.v.log.Write(p)
}

// Log is what varnishd printed.
func (v *Varnish) Log() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.log.String()
}

// Get fetches host's path through Varnish and returns the status, the body and the
// X-Cache and Age headers.
func (v *Varnish) Get(host, path string) (status int, body []byte, cache string, age int, err error) {
	req, err := http.NewRequest(http.MethodGet, v.URL+path, nil)
	if err != nil {
		return 0, nil, "", 0, err
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, nil, "", 0, err
	}
	age, _ = strconv.Atoi(resp.Header.Get("Age"))
	return resp.StatusCode, buf.Bytes(), resp.Header.Get("X-Cache"), age, nil
}
