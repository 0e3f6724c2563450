// Package acmetest runs a real ACME CA for tests: Debian's pebble, with
// pebble-challtestsrv as its DNS server resolving every name to 127.0.0.1, validating
// HTTP-01 and TLS-ALPN-01 on the loopback ports the test names. It also has what tests
// of HTTPS edges need around it: a TCP balancer that decides which edge each
// connection reaches (and can hold connections back), and an HTTP CONNECT proxy that
// lets apt reach an edge for a hostname no DNS knows.
package acmetest

import (
	"bytes"
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
	"strings"
	"sync"
	"testing"
	"time"
)

// Pebble is a running ACME CA.
type Pebble struct {
	Dir    string // the ACME directory URL (acme_ca)
	CAFile string // pebble's own HTTPS certificate (acme_ca_root)
	mgmt   string // the management address (roots)
	client *http.Client
	mu     sync.Mutex
	log    bytes.Buffer
}

// Options of Start.
type Options struct {
	// HTTPPort and TLSPort are where pebble validates HTTP-01 and TLS-ALPN-01 (on
	// 127.0.0.1, whatever name it validates).
	HTTPPort, TLSPort int
	// Validity is the lifetime of the certificates it issues (0: pebble's five years).
	Validity time.Duration
	// AuthzReuse lets pebble reuse valid authorizations half the time, as it does by
	// default; otherwise every order is validated anew.
	AuthzReuse bool
}

// Start runs pebble-challtestsrv and pebble until the test ends. A missing tool fails
// the test with how to install it.
func Start(t testing.TB, o Options) *Pebble {
	t.Helper()
	for _, tool := range []string{"pebble", "pebble-challtestsrv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run .ci/install-deps (Debian package pebble)", tool)
		}
	}
	dir := t.TempDir()
	p := &Pebble{CAFile: filepath.Join(dir, "cert.pem")}
	pool := writeServerCert(t, p.CAFile, filepath.Join(dir, "key.pem"))
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	dns := freeUDPAddr(t)
	dnsMgmt := FreeAddr(t)
	p.start(t, "pebble-challtestsrv", nil, "-dns01", dns, "-management", dnsMgmt,
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
	WaitTCP(t, dnsMgmt)

	listen, mgmt := FreeAddr(t), FreeAddr(t)
	cfg := map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": p.CAFile, "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": o.HTTPPort, "tlsPort": o.TLSPort, "ocspResponderURL": "",
		"externalAccountBindingRequired": false,
	}
	if o.Validity > 0 {
		cfg["certificateValidityPeriod"] = uint64(o.Validity / time.Second)
	}
	data, _ := json.Marshal(map[string]any{"pebble": cfg})
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// No random validation delays, no rejected nonces.
	env := []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}
	if !o.AuthzReuse {
		env = append(env, "PEBBLE_AUTHZREUSE=0")
	}
	p.start(t, "pebble", env, "-config", cfgFile, "-dnsserver", dns)
	p.Dir, p.mgmt = "https://"+listen+"/dir", mgmt
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
			t.Fatalf("pebble did not come up within 15s (%v):\n%s", err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// start runs a command, its output into p's log, until the test ends.
func (p *Pebble) start(t testing.TB, name string, env []string, args ...string) {
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

// Output is everything pebble and its DNS server logged.
func (p *Pebble) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Requests counts the ACME requests pebble served whose path starts with prefix
// (pebble logs "GET /dir -> calling handler()" for each).
func (p *Pebble) Requests(prefix string) int {
	n := 0
	for _, line := range strings.Split(p.Output(), "\n") {
		_, req, ok := strings.Cut(line, " /")
		if ok && strings.HasSuffix(line, "-> calling handler()") && strings.HasPrefix("/"+req, prefix) {
			n++
		}
	}
	return n
}

// Orders counts the certificate orders pebble received.
func (p *Pebble) Orders() int { return p.Requests("/order-plz") }

// Root returns the root pebble issues under, as a pool and as PEM.
func (p *Pebble) Root(t testing.TB) (*x509.CertPool, []byte) {
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
func writeServerCert(t testing.TB, certFile, keyFile string) *x509.CertPool {
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
func freeUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// FreeAddr returns a loopback TCP address that was free a moment ago, for a server
// started as another process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitTCP waits up to 10 s until something listens on addr.
func WaitTCP(t testing.TB, addr string) {
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
