package edged

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/caddyserver/certmagic"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.uber.org/zap"

	"github.com/armor-apt/armor/internal/hostname"
)

// HTTPS. Distributors point their own hostnames at the edge (a CNAME) and the edge
// serves each of them with a certificate of its own from an ACME CA, obtained on demand:
// at the first TLS handshake that names the hostname by SNI, and only when the routing
// table lists it, so nobody can make the edge order certificates for names it does not
// serve (a CA's rate limits are per account). Certificates, the account and its key are
// kept under <state_dir>/acme, so a restart serves from disk without a new order. The CA
// validates by HTTP-01, answered on the plain listener, or TLS-ALPN-01, answered on the
// HTTPS listener itself: edged binds no port of its own for them.
//
// With acme_storage = "local" certificates are per edge: several edges behind one DNS
// name would each order their own, and a CA's validation request could land on another
// edge than the one that ordered, which would fail it. With acme_storage = "controld"
// (certstore.go) the edges share one storage and its locks: one certificate per
// hostname, ordered and renewed by one edge, and any edge answers any challenge from the
// tokens in the shared storage.

// acmeSubdir is where certmagic keeps certificates, keys and the ACME account.
const acmeSubdir = "acme"

// errNotRouted refuses a certificate, and a handshake, for a hostname not routed.
var errNotRouted = errors.New("hostname not routed by this edge")

// acmeChallengePrefix starts the path of every HTTP-01 validation request.
var acmeChallengePrefix = []byte("/.well-known/acme-challenge/")

// acmeTLS is the edge's certificate manager.
type acmeTLS struct {
	cache     *certmagic.Cache
	magic     *certmagic.Config
	shared    *sharedStorage // acme_storage = "controld"; nil for local
	tlsConfig *tls.Config
	challenge fasthttp.RequestHandler // answers HTTP-01 validation requests
}

// EnableACME makes the edge obtain certificates by ACME (Config's acme_* keys) for the
// hostnames it routes: httpAddr is the plain listener (HTTP-01 is answered there by
// Serve) and tlsAddr the HTTPS listener (TLS-ALPN-01 is answered by ServeTLS). Call it
// once, before Serve and ServeTLS; Close stops it.
func (e *Edge) EnableACME(httpAddr, tlsAddr net.Addr) error {
	if e.acme != nil {
		return errors.New("enable ACME: already enabled")
	}
	if e.cfg.StateDir == "" {
		return errors.New("enable ACME: certificates are kept under state_dir, which is empty")
	}
	roots, err := loadRoots(e.cfg.ACMECARoot)
	if err != nil {
		return err
	}
	listenHost, httpPort, err := splitAddr(httpAddr)
	if err != nil {
		return fmt.Errorf("enable ACME: plain listener: %w", err)
	}
	_, tlsPort, err := splitAddr(tlsAddr)
	if err != nil {
		return fmt.Errorf("enable ACME: HTTPS listener: %w", err)
	}
	a := &acmeTLS{}
	nop := zap.NewNop()
	a.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return a.magic, nil },
		RenewCheckInterval: e.cfg.ACMERenewInterval.D(),
		Logger:             nop,
	})
	local := filepath.Join(e.cfg.StateDir, acmeSubdir)
	var storage certmagic.Storage = &certmagic.FileStorage{Path: local}
	if e.cfg.ACMEStorage == StorageControld {
		if a.shared, err = newSharedStorage(e, local); err != nil {
			return fmt.Errorf("enable ACME: %w", err)
		}
		storage = a.shared
	}
	a.magic = certmagic.New(a.cache, certmagic.Config{
		Storage:  storage,
		OnDemand: &certmagic.OnDemandConfig{DecisionFunc: e.routedName},
		OnEvent:  e.acmeEvent,
		Logger:   nop,
	})
	issuer := certmagic.NewACMEIssuer(a.magic, certmagic.ACMEIssuer{
		CA:     e.cfg.ACMECA,
		Email:  e.cfg.ACMEEmail,
		Agreed: true,
		// The solvers try to bind these ports and, finding edged's own listeners there,
		// leave the challenges to them.
		ListenHost:              listenHost,
		AltHTTPPort:             httpPort,
		AltTLSALPNPort:          tlsPort,
		TrustedRoots:            roots,
		DisableHTTPChallenge:    e.cfg.ACMEChallenge == ChallengeTLSALPN01,
		DisableTLSALPNChallenge: e.cfg.ACMEChallenge == ChallengeHTTP01,
		Logger:                  nop,
	})
	a.magic.Issuers = []certmagic.Issuer{issuer}
	base := a.magic.TLSConfig()
	a.tlsConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// fasthttp speaks HTTP/1.1; acme-tls/1 is the TLS-ALPN-01 validation.
		NextProtos: append([]string{"http/1.1"}, base.NextProtos...),
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// A hostname no longer routed is refused even with a certificate cached.
			if err := e.routedName(hello.Context(), hello.ServerName); err != nil {
				return nil, err
			}
			return base.GetCertificate(hello)
		},
	}
	a.challenge = fasthttpadaptor.NewFastHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !issuer.HandleHTTPChallenge(w, r) {
			http.NotFound(w, r)
		}
	}))
	e.acme = a
	e.logger.Info("certificates by ACME", "ca", e.cfg.ACMECA, "storage", storage)
	return nil
}

func (a *acmeTLS) stop() {
	a.cache.Stop()
	if a.shared != nil {
		a.shared.releaseAll()
	}
}

// ServeTLS serves the public handler over HTTPS on ln, with the certificates of
// EnableACME, until ctx is cancelled; it shuts down as Serve does. A handshake whose SNI
// names no routed hostname fails.
func (e *Edge) ServeTLS(ctx context.Context, ln net.Listener) error {
	if e.acme == nil {
		return errors.New("serve HTTPS: no certificates: call EnableACME first")
	}
	return e.serveListener(ctx, ln, e.handle, e.acme.tlsConfig)
}

// plainHandler is the plain listener's handler: handle itself, or with ACME enabled
// handle behind the HTTP-01 validation path of routed hostnames.
func (e *Edge) plainHandler() fasthttp.RequestHandler {
	a := e.acme
	if a == nil {
		return e.handle
	}
	return func(ctx *fasthttp.RequestCtx) {
		if bytes.HasPrefix(ctx.Request.Header.RequestURI(), acmeChallengePrefix) &&
			e.routedName(ctx, string(ctx.Request.Header.Host())) == nil {
			a.challenge(ctx)
			return
		}
		e.handle(ctx)
	}
}

// routedName is certmagic's on-demand decision: nil when the routing table serves name
// (an SNI value or a Host header), else why not.
func (e *Edge) routedName(_ context.Context, name string) error {
	h, err := hostname.Normalize(name)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotRouted, err)
	}
	if net.ParseIP(h) != nil {
		return fmt.Errorf("%w: %s is an IP address", errNotRouted, h)
	}
	if t := e.table.Load(); t == nil || t.hosts[h] == nil {
		return fmt.Errorf("%w: %s", errNotRouted, h)
	}
	return nil
}

// acmeEvent logs and counts certmagic's events about certificates.
func (e *Edge) acmeEvent(_ context.Context, event string, data map[string]any) error {
	switch event {
	case "cert_obtaining":
		e.logger.Info("obtaining a certificate", "hostname", data["identifier"], "renewal", data["renewal"])
	case "cert_obtained":
		e.m.certs.WithLabelValues("obtained").Inc()
		e.logger.Info("certificate obtained", "hostname", data["identifier"], "renewal", data["renewal"], "issuer", data["issuer"])
	case "cert_failed":
		e.m.certs.WithLabelValues("failed").Inc()
		e.logger.Warn("certificate not obtained", "hostname", data["identifier"], "renewal", data["renewal"], "err", data["error"])
	case "cached_managed_cert":
		e.logger.Debug("certificate loaded", "hostnames", data["sans"])
	}
	return nil
}

// handleTLSError is the HTTPS listener's ErrorHandler: a failed handshake is counted
// and logged (no answer can reach the client), anything else is handleParseError's.
func (e *Edge) handleTLSError(ctx *fasthttp.RequestCtx, err error) {
	if c, ok := ctx.Conn().(*tls.Conn); ok && !c.ConnectionState().HandshakeComplete {
		reason := "other"
		if errors.Is(err, errNotRouted) {
			reason = "unrouted"
		}
		e.m.handshakes.WithLabelValues(reason).Inc()
		e.logger.Debug("TLS handshake failed", "remote", ctx.RemoteAddr().String(), "err", err)
		return
	}
	e.handleParseError(ctx, err)
}

// loadRoots reads acme_ca_root: nil (the system's roots) when path is "".
func loadRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("acme_ca_root: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("acme_ca_root: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// splitAddr returns a TCP listener's host and port.
func splitAddr(a net.Addr) (string, int, error) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("port of %s: %w", a, err)
	}
	return host, p, nil
}
