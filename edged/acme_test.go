package edged

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/store"
)

// pebble is a real ACME CA (Debian's pebble) on loopback, resolving every hostname to
// 127.0.0.1 through its DNS test server (pebble-challtestsrv), and validating on the
// edge's own plain and HTTPS ports.
type pebble struct {
	dir    string // the ACME directory URL
	mgmt   string // the management address (roots)
	caFile string // pebble's own HTTPS certificate: acme_ca_root
	client *http.Client
	mu     sync.Mutex
	log    bytes.Buffer
}

// startPebble runs pebble-challtestsrv and pebble until the test ends. httpPort and
// tlsPort are where pebble validates HTTP-01 and TLS-ALPN-01.
func startPebble(t *testing.T, httpPort, tlsPort int) *pebble {
	t.Helper()
	for _, tool := range []string{"pebble", "pebble-challtestsrv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run .ci/install-deps (Debian package pebble)", tool)
		}
	}
	dir := t.TempDir()
	p := &pebble{caFile: filepath.Join(dir, "cert.pem")}
	pool := writeServerCert(t, p.caFile, filepath.Join(dir, "key.pem"))
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	dns := freeUDPAddr(t)
	dnsMgmt := freeAddr(t)
	startLogged(t, p, "pebble-challtestsrv", nil, "-dns01", dns, "-management", dnsMgmt,
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
	waitTCP(t, dnsMgmt)

	listen, mgmt := freeAddr(t), freeAddr(t)
	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": p.caFile, "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": httpPort, "tlsPort": tlsPort, "ocspResponderURL": "",
		"externalAccountBindingRequired": false,
	}})
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	// No random validation delays, no rejected nonces, and every order validated anew.
	env := []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
	startLogged(t, p, "pebble", env, "-config", cfgFile, "-dnsserver", dns)
	p.dir, p.mgmt = "https://"+listen+"/dir", mgmt
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := p.client.Get("https://" + mgmt + "/roots/0")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not come up within 15s (%v):\n%s", err, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// startLogged runs a command, its output into p's log, until the test ends.
func startLogged(t *testing.T, p *pebble, name string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	w := &lockedWriter{mu: &p.mu, w: &p.log}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *pebble) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// requests counts the ACME requests pebble has served whose path starts with prefix
// (pebble logs "GET /dir -> calling handler()" for each).
func (p *pebble) requests(prefix string) int {
	n := 0
	for _, line := range strings.Split(p.output(), "\n") {
		_, req, ok := strings.Cut(line, " /")
		if ok && strings.HasSuffix(line, "-> calling handler()") && strings.HasPrefix("/"+req, prefix) {
			n++
		}
	}
	return n
}

// root returns the root that pebble issues under, as a pool and as PEM.
func (p *pebble) root(t *testing.T) (*x509.CertPool, []byte) {
	t.Helper()
	resp, err := p.client.Get("https://" + p.mgmt + "/roots/0")
	if err != nil {
		t.Fatalf("pebble's root: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if err != nil || resp.StatusCode != 200 || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble's root: status %d, %v:\n%s", resp.StatusCode, err, b)
	}
	return pool, b
}

// writeServerCert writes a self-signed certificate for 127.0.0.1 and localhost, and
// returns a pool trusting it.
func writeServerCert(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "pebble test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

// freeUDPAddr returns a loopback UDP address that was free a moment ago.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

func waitTCP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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
	peb   *pebble
	roots *x509.CertPool
	rel   *rel
	files map[string][]byte
}

func newACMESetup(t *testing.T, challenge string, tree map[string][]byte) *acmeSetup {
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
	s.cfg.Listen, s.cfg.AdminListen, s.cfg.TLSListen = freeAddr(t), freeAddr(t), freeAddr(t)
	s.peb = startPebble(t, portOf(t, s.cfg.Listen), portOf(t, s.cfg.TLSListen))
	s.roots, _ = s.peb.root(t)
	s.cfg.ACMECA, s.cfg.ACMECARoot, s.cfg.ACMEChallenge = s.peb.dir, s.peb.caFile, challenge
	s.cfg.ACMEEmail = "ops@example.org"
	return s
}

// run starts Run and waits until it serves Release over plain HTTP; the returned
// function stops it and checks it returned nil.
func (s *acmeSetup) run(t *testing.T) (stop func()) {
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
			t.Fatalf("Run returned before serving: %v", err)
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
	return stop
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
	s := newACMESetup(t, challenge, aptTree("demo", 1))
	stop := s.run(t)

	asked := s.peb.requests("/")
	for _, name := range []string{hostB, "", "127.0.0.1"} {
		if leaf, err := s.handshake(name); err == nil {
			t.Fatalf("handshake with SNI %q (not routed) gave a certificate for %v", name, leaf.DNSNames)
		}
	}
	if n := s.peb.requests("/"); n != asked {
		t.Fatalf("handshakes naming unrouted hostnames made edged ask the CA %d times:\n%s", n-asked, s.peb.output())
	}

	resp, body, err := s.getTLS(hostA, "/dists/stable/InRelease")
	if err != nil {
		t.Fatalf("HTTPS GET InRelease at %s: %v\npebble:\n%s", hostA, err, s.peb.output())
	}
	wantStatus(t, "HTTPS InRelease", resp, body, 200)
	if !bytes.Equal(body, s.rel.object("dists/stable/InRelease")) {
		t.Fatalf("HTTPS InRelease differs from the release's:\n%s", body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.VerifyHostname(hostA); err != nil {
		t.Fatalf("certificate served for %s: %v", hostA, err)
	}
	if n := s.peb.requests("/order-plz"); n != 1 {
		t.Fatalf("%d orders for one hostname; want 1:\n%s", n, s.peb.output())
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
	asked = s.peb.requests("/")
	s.run(t)
	again, err := s.handshake(hostA)
	if err != nil {
		t.Fatalf("handshake for %s after a restart: %v", hostA, err)
	}
	if again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("after a restart the certificate has serial %x; want %x, the one kept in state_dir", again.SerialNumber, leaf.SerialNumber)
	}
	if n := s.peb.requests("/"); n != asked {
		t.Fatalf("after a restart edged asked the CA %d times; want none:\n%s", n-asked, s.peb.output())
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

// connectProxy is an HTTP proxy that tunnels every CONNECT to target, whatever host it
// names, so apt reaches the edge's HTTPS listener for a hostname no DNS knows. It
// returns its address and the hosts CONNECT asked for.
func connectProxy(t *testing.T, target string) (string, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
					return
				}
				mu.Lock()
				asked = append(asked, req.Host)
				mu.Unlock()
				up, err := net.Dial("tcp", target)
				if err != nil {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() {
					io.Copy(up, br)
					up.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, up)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// TestACMERealApt: apt-get over HTTPS, trusting only pebble's root, updates from the
// edge and downloads intact packages.
func TestACMERealApt(t *testing.T) {
	tree := aptRepo(t)
	s := newACMESetup(t, "", tree)
	s.run(t)
	_, rootPEM := s.peb.root(t)
	caFile := filepath.Join(t.TempDir(), "pebble-root.pem")
	if err := os.WriteFile(caFile, rootPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy, asked := connectProxy(t, s.cfg.TLSListen)
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
	if n := s.peb.requests("/order-plz"); n != 1 {
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
