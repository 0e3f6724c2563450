package edged

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/acmetest"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/store"
)

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("port of %q: %v %v", addr, err, err2)
	}
	return n
}

// acmeSetup is the whole daemon (Run) over a local-directory store, with HTTPS by
// ACME from pebble, serving aptTree at hostA.
type acmeSetup struct {
	cfg   Config
	ctl   *fakeControld
	peb   *acmetest.Pebble
	roots *x509.CertPool
	rel   *rel
	files map[string][]byte
}

func newACMESetup(t *testing.T, challenge string, tree map[string][]byte, addr func(testing.TB) string) *acmeSetup {
	t.Helper()
	dir := t.TempDir()
	rc, err := store.OpenRclone(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cas := &testStore{Store: rc, opens: map[string]int{}}
	s := &acmeSetup{ctl: newFakeControld(t), files: tree}
	s.rel = makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	s.ctl.set(feedSite("demo", []string{hostA}, s.rel))
	s.cfg = testConfig(t, s.ctl)
	s.cfg.Store = dir
	s.cfg.Listen, s.cfg.AdminListen, s.cfg.TLSListen = addr(t), addr(t), addr(t)
	s.peb = acmetest.Start(t, acmetest.Options{HTTPPort: portOf(t, s.cfg.Listen), TLSPort: portOf(t, s.cfg.TLSListen)})
	s.roots, _ = s.peb.Root(t)
	s.cfg.ACMECA, s.cfg.ACMECARoot, s.cfg.ACMEChallenge = s.peb.Dir, s.peb.CAFile, challenge
	s.cfg.ACMEEmail = "ops@example.org"
	return s
}

// startACME sets up edged with ACME (newACMESetup) and runs it. Its ports were free when
// they were chosen, and pebble must be told them before edged binds them: should another
// process take one meanwhile, it starts again on new ports, up to three times.
func startACME(t *testing.T, challenge string, tree map[string][]byte) (*acmeSetup, func()) {
	return startACMEOn(t, challenge, tree, freeAddr)
}

// startACMEOn is startACME with the listeners' addresses from addr.
func startACMEOn(t *testing.T, challenge string, tree map[string][]byte, addr func(testing.TB) string) (*acmeSetup, func()) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s := newACMESetup(t, challenge, tree, addr)
		stop, err := s.tryRun(t)
		if err == nil {
			return s, stop
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatalf("Run returned before serving: %v", err)
		}
		t.Logf("a port was taken before edged bound it (%v): again on new ports", err)
	}
}

// run starts Run and waits until it serves Release over plain HTTP; the returned
// function stops it and checks it returned nil.
func (s *acmeSetup) run(t *testing.T) (stop func()) {
	t.Helper()
	stop, err := s.tryRun(t)
	if err != nil {
		t.Fatalf("Run returned before serving: %v", err)
	}
	return stop
}

// tryRun is run, returning Run's error if it returned before serving.
func (s *acmeSetup) tryRun(t *testing.T) (stop func(), err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, s.cfg, testLogger(t)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := tryGet(s.cfg.Listen, hostA, "/dists/stable/Release")
		if status == 200 && bytes.Equal(body, s.rel.object("dists/stable/Release")) {
			break
		}
		select {
		case err := <-errc:
			cancel()
			return nil, err
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run did not serve Release within 10s (last status %d)", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return within 15s of cancel")
		}
	}
	t.Cleanup(stop)
	return stop, nil
}

// getTLS fetches path from the HTTPS listener with SNI and Host serverName, trusting
// only pebble's root.
func (s *acmeSetup) getTLS(serverName, path string) (*http.Response, []byte, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", s.cfg.TLSListen)
		},
		TLSClientConfig:     &tls.Config{RootCAs: s.roots, ServerName: serverName},
		TLSHandshakeTimeout: 60 * time.Second,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 90 * time.Second}
	resp, err := c.Get("https://" + serverName + path)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// handshake is a bare TLS handshake with the HTTPS listener; the leaf on success.
func (s *acmeSetup) handshake(serverName string) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{RootCAs: s.roots, ServerName: serverName}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", s.cfg.TLSListen)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// TestACME: with tls_listen set, edged obtains a certificate from a real ACME CA
// (pebble) for a routed hostname at the first handshake naming it, validated by each
// challenge on edged's own listeners, and serves the tree over HTTPS; an unrouted
// hostname gets no certificate and the CA is not asked; after a restart the
// certificate comes from state_dir without a new order; a hostname routed no longer is
// refused although its certificate is cached.
func TestACME(t *testing.T) {
	for _, challenge := range []string{ChallengeHTTP01, ChallengeTLSALPN01} {
		t.Run(challenge, func(t *testing.T) { testACME(t, challenge) })
	}
}

func testACME(t *testing.T, challenge string) {
	s, stop := startACME(t, challenge, aptTree("demo", 1))

	asked := s.peb.Requests("/")
	for _, name := range []string{hostB, "", "127.0.0.1"} {
		if leaf, err := s.handshake(name); err == nil {
			t.Fatalf("handshake with SNI %q (not routed) gave a certificate for %v", name, leaf.DNSNames)
		}
	}
	if n := s.peb.Requests("/"); n != asked {
		t.Fatalf("handshakes naming unrouted hostnames made edged ask the CA %d times:\n%s", n-asked, s.peb.Output())
	}

	resp, body, err := s.getTLS(hostA, "/dists/stable/InRelease")
	if err != nil {
		t.Fatalf("HTTPS GET InRelease at %s: %v\npebble:\n%s", hostA, err, s.peb.Output())
	}
	wantStatus(t, "HTTPS InRelease", resp, body, 200)
	if !bytes.Equal(body, s.rel.object("dists/stable/InRelease")) {
		t.Fatalf("HTTPS InRelease differs from the release's:\n%s", body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.VerifyHostname(hostA); err != nil {
		t.Fatalf("certificate served for %s: %v", hostA, err)
	}
	if n := s.peb.Requests("/order-plz"); n != 1 {
		t.Fatalf("%d orders for one hostname; want 1:\n%s", n, s.peb.Output())
	}
	// Plain HTTP keeps serving beside HTTPS.
	if status, b := getStatus(s.cfg.Listen, hostA, "/dists/stable/InRelease"); status != 200 || !bytes.Equal(b, body) {
		t.Fatalf("plain HTTP InRelease beside HTTPS: status %d", status)
	}
	m := scrape(t, s.cfg.AdminListen)
	for _, series := range []string{
		`armor_edge_tls_handshake_failures_total{reason="unrouted"} 3`,
		`armor_edge_acme_certificates_total{result="obtained"} 1`,
	} {
		if !strings.Contains(m, series+"\n") {
			t.Fatalf("metrics lack %s:\n%s", series, m)
		}
	}
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "armor_edge_requests_total{") && strings.Contains(line, `status="400"`) && !strings.HasSuffix(line, " 0") {
			t.Fatalf("failed handshakes were counted as requests answered 400: %s", line)
		}
	}
	keys, _ := filepath.Glob(filepath.Join(s.cfg.StateDir, acmeSubdir, "certificates", "*", "*", "*.key"))
	if len(keys) == 0 {
		t.Fatalf("no certificate key under %s", filepath.Join(s.cfg.StateDir, acmeSubdir))
	}

	stop()
	asked = s.peb.Requests("/")
	s.run(t)
	again, err := s.handshake(hostA)
	if err != nil {
		t.Fatalf("handshake for %s after a restart: %v", hostA, err)
	}
	if again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("after a restart the certificate has serial %x; want %x, the one kept in state_dir", again.SerialNumber, leaf.SerialNumber)
	}
	if n := s.peb.Requests("/"); n != asked {
		t.Fatalf("after a restart edged asked the CA %d times; want none:\n%s", n-asked, s.peb.Output())
	}

	// The routes move hostA's repository to hostB: hostA's cached certificate is no
	// longer served.
	v := s.ctl.set(feedSite("demo", []string{hostB}, s.rel))
	deadline := time.Now().Add(10 * time.Second)
	for status, _ := getStatus(s.cfg.Listen, hostA, "/dists/stable/InRelease"); status != 404; status, _ = getStatus(s.cfg.Listen, hostA, "/dists/stable/InRelease") {
		if time.Now().After(deadline) {
			t.Fatalf("routes version %d not applied within 10s", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.handshake(hostA); err == nil {
		t.Fatalf("handshake for %s after it was unrouted still succeeded", hostA)
	}
}

// TestACMEPortTaken: when a port chosen for edged is taken before edged binds it (here
// the HTTPS one of the first attempt, held by the test), the set-up starts again on new
// ports instead of failing.
func TestACMEPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	n := 0
	addr := func(t testing.TB) string {
		if n++; n == 3 {
			return taken.Addr().String()
		}
		return freeAddr(t)
	}
	s, _ := startACMEOn(t, ChallengeHTTP01, aptTree("demo", 1), addr)
	if n != 6 || s.cfg.TLSListen == taken.Addr().String() {
		t.Fatalf("set-up after a taken port: %d addresses asked for, HTTPS on %s (the taken one is %s)", n, s.cfg.TLSListen, taken.Addr())
	}
	if _, err := s.handshake(hostA); err != nil {
		t.Fatalf("handshake with the edge started again on new ports: %v", err)
	}
}

// TestACMERealApt: apt-get over HTTPS, trusting only pebble's root, updates from the
// edge and downloads intact packages.
func TestACMERealApt(t *testing.T) {
	tree := aptRepo(t)
	s, _ := startACME(t, "", tree)
	_, rootPEM := s.peb.Root(t)
	caFile := filepath.Join(t.TempDir(), "pebble-root.pem")
	if err := os.WriteFile(caFile, rootPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy, asked := acmetest.ConnectProxy(t, s.cfg.TLSListen)
	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "https://" + hostA + "/", Suites: []string{"stable"}, Components: []string{"main"}}},
		Extra:   []string{"Acquire::https::Proxy=http://" + proxy, "Acquire::https::CaInfo=" + caFile},
	})
	apt.Update(t)
	if got := apt.Policy(t, "natpmp-utils"); got != "20150609-7.1" {
		t.Fatalf("natpmp-utils candidate %q over HTTPS; want 20150609-7.1", got)
	}
	for _, f := range apt.Download(t, "natpmpc", "libnatpmp1") {
		want := tree["pool/main/n/natpmp/"+filepath.Base(f)]
		got, err := os.ReadFile(f)
		if err != nil || want == nil || !bytes.Equal(got, want) {
			t.Fatalf("downloaded %s differs from the published package (%v)", filepath.Base(f), err)
		}
	}
	// apt checks the certificate: trusting the system's roots only, it fetches nothing.
	untrusting := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "https://" + hostA + "/", Suites: []string{"stable"}, Components: []string{"main"}}},
		Extra:   []string{"Acquire::https::Proxy=http://" + proxy},
	})
	out, _ := untrusting.Cmd("update").CombinedOutput()
	if !strings.Contains(string(out), "Certificate verification failed") || strings.Contains(string(out), "Get:") {
		t.Fatalf("apt-get update without pebble's root did not fail on the certificate:\n%s", out)
	}
	if hosts := asked(); len(hosts) == 0 {
		t.Fatal("apt made no CONNECT: it did not go over HTTPS")
	} else if hosts[0] != hostA+":443" {
		t.Fatalf("apt CONNECTed to %q; want %s:443", hosts[0], hostA)
	}
	if n := s.peb.Requests("/order-plz"); n != 1 {
		t.Fatalf("%d orders; want 1", n)
	}
}

// TestEnableACMEErrors: ACME that cannot work is refused at start, naming the key.
func TestEnableACMEErrors(t *testing.T) {
	ctl := newFakeControld(t)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	tests := []struct {
		name string
		edit func(*Config)
		err  string
	}{
		{"root file missing", func(c *Config) { c.ACMECARoot = filepath.Join(t.TempDir(), "none.pem") }, "acme_ca_root"},
		{"root file not PEM", func(c *Config) {
			c.ACMECARoot = filepath.Join(t.TempDir(), "root.pem")
			os.WriteFile(c.ACMECARoot, []byte("not a certificate"), 0o644)
		}, "acme_ca_root"},
		{"no state_dir", func(c *Config) { c.StateDir = "" }, "state_dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, ctl)
			cfg.TLSListen = "127.0.0.1:443"
			tt.edit(&cfg)
			e, err := New(cfg, newTestStore(), testLogger(t))
			if err == nil {
				defer e.Close()
				err = e.EnableACME(addr, addr)
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v; want one naming %s", err, tt.err)
			}
		})
	}
	e, err := New(testConfig(t, ctl), newTestStore(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := e.ServeTLS(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "EnableACME") {
		t.Fatalf("ServeTLS without EnableACME: %v", err)
	}
}
