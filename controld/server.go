package controld

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/armor-apt/armor/controld/hooks"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/store"
)

// Server is the controld API over a state store and an object store.
type Server struct {
	cfg   Config
	store store.Store
	st    state.Store
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux

	changes notifier      // broadcast after every successful change
	quit    chan struct{} // closed when shutting down: long polls end
	quitMu  sync.Once

	known    knownObjects     // the active manifests' objects, known to be in the store
	indexes  indexCache       // what the indexes read so far list (indexcache.go)
	verified verifiedReleases // what the releases verified last showed (verified.go)
	expiry   expiryWatch
	gc       gcState
	hooks    *hooks.Dispatcher // webhooks.go
	diffs    pathDiffs
}

// NewServer returns a server; it does not own store or st and never closes them.
func NewServer(cfg Config, cas store.Store, st state.Store) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("controld config: %w", err)
	}
	if cas == nil || st == nil {
		return nil, errors.New("controld: an object store and a state store are required")
	}
	s := &Server{
		cfg: cfg, store: cas, st: st, log: cfg.Logger, now: cfg.Now,
		mux: http.NewServeMux(), quit: make(chan struct{}),
	}
	s.indexes.max = cfg.IndexCacheEntries
	s.changes.init()
	s.hooks = s.newDispatcher()
	s.register()
	return s, nil
}

// Handler returns the API handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves the API on ln (HTTPS when the config names a certificate and key) until
// ctx is cancelled, then shuts down gracefully: it stops accepting, ends long polls and
// waits up to the shutdown timeout for requests in flight. It returns nil after a
// graceful shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.watchExpiry(watchCtx, expiryInterval)
	go s.cleanTemp(watchCtx, tempCleanInterval)
	if w, ok := s.st.(changeWatcher); ok {
		go w.Watch(watchCtx, s.changes.broadcast, func(err error) {
			s.log.Warn("listen for changes of other replicas", "err", err)
		})
	}
	if s.cfg.GCInterval > 0 {
		go s.scheduleGC(watchCtx, s.cfg.GCInterval.D())
	}
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		s.runHooks(watchCtx)
	}()

	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLSCert != "" {
			errc <- srv.ServeTLS(ln, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout.D())
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	stopWatch()
	<-hooksDone // the webhook attempts in flight finish (within [hooks] timeout)
	if err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// Close ends pending long polls (they answer 304 at once) and makes new ones return at
// once. The handler keeps serving other requests.
func (s *Server) Close() {
	s.quitMu.Do(func() { close(s.quit) })
}

// call is one authenticated request.
type call struct {
	w   http.ResponseWriter
	r   *http.Request
	tok state.Token
}

func (c *call) ctx() context.Context { return c.r.Context() }

// handler is an API endpoint; it returns a typed error or nil after writing its answer.
type handler func(c *call) error

// route registers h for pattern behind authentication, the body limit and logging; a
// change it makes wakes the routes feed and the webhooks.
func (s *Server) route(pattern string, h handler) { s.routeWith(pattern, h, false) }

// routeQuiet is route for requests that change nothing edges route by or hooks tell
// of (the certificate storage): they wake nobody, and are logged at debug level.
func (s *Server) routeQuiet(pattern string, h handler) { s.routeWith(pattern, h, true) }

func (s *Server) routeWith(pattern string, h handler, quiet bool) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.MaxBody)
		c := &call{w: rec, r: r}
		err := s.authenticate(c)
		if err == nil {
			err = h(c)
		}
		if err != nil {
			writeError(rec, s.log, r, err)
		} else if r.Method != http.MethodGet && r.Method != http.MethodHead && !quiet {
			s.changes.broadcast()
		}
		level := slog.LevelDebug
		if r.Method != http.MethodGet && !quiet || rec.status >= 400 && rec.status != http.StatusConflict {
			level = slog.LevelInfo
		}
		s.log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "token", c.tok.Name, "duration", time.Since(start))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// decode reads the request body as exactly one JSON value into v, strictly: an unknown
// field is a 400 naming it.
func decode(c *call, v any) error {
	dec := json.NewDecoder(c.r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return err
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty: send a JSON object")
		default:
			return badRequest("request body: %v", err)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("request body has data after the JSON object")
	}
	return nil
}

// register declares every endpoint; API.md documents them.
func (s *Server) register() {
	s.mux.HandleFunc("GET /v1/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.route("GET /v1/repos", s.listRepos)
	s.route("POST /v1/repos", s.createRepo)
	s.route("GET /v1/repos/{repo}", s.showRepo)
	s.route("POST /v1/repos/{repo}/hostnames", s.addHostnames)
	s.route("POST /v1/repos/{repo}/keys", s.addKey)
	s.route("DELETE /v1/repos/{repo}/keys/{fingerprint}", s.removeKey)
	s.route("PUT /v1/repos/{repo}/retention", s.setRetention)
	s.route("GET /v1/repos/{repo}/releases", s.listReleases)
	s.route("POST /v1/repos/{repo}/releases", s.recordRelease)
	s.route("GET /v1/repos/{repo}/releases/{id}", s.showRelease)
	s.route("DELETE /v1/repos/{repo}/releases/{id}", s.deleteRelease)
	s.route("POST /v1/repos/{repo}/activate", s.activate)
	s.route("POST /v1/repos/{repo}/rollback", s.rollback)
	s.route("GET /v1/repos/{repo}/history", s.history)
	s.route("GET /v1/repos/{repo}/status", s.status)
	s.route("GET /v1/repos/{repo}/missing", s.listMissing)
	s.route("POST /v1/repos/{repo}/missing", s.reportMissing)
	s.route("GET /v1/token", s.ownToken)
	s.route("GET /v1/tokens", s.listTokens)
	s.route("POST /v1/tokens", s.createToken)
	s.route("DELETE /v1/tokens/{name}", s.revokeToken)
	s.route("GET /v1/routes", s.routes)
	s.route("POST /v1/gc", s.gcHandler)
	s.route("GET /v1/hooks", s.listHooks)
	s.route("POST /v1/hooks", s.createHook)
	s.route("DELETE /v1/hooks/{id}", s.deleteHook)
	s.route("POST /v1/hooks/{id}/ping", s.pingHook)
	s.route("GET /v1/hooks/deliveries", s.hookDeliveries)
	s.route("POST /v1/hooks/deliveries/{id}/redeliver", s.redeliver)
	s.routeQuiet("GET /v1/certs/files/{key...}", s.getCertFile)
	s.routeQuiet("PUT /v1/certs/files/{key...}", s.putCertFile)
	s.routeQuiet("DELETE /v1/certs/files/{key...}", s.deleteCertFiles)
	s.routeQuiet("GET /v1/certs/list", s.listCertFiles)
	s.routeQuiet("POST /v1/certs/locks/{name...}", s.lockCert)
	s.routeQuiet("DELETE /v1/certs/locks/{name...}", s.unlockCert)
	s.route("/", func(c *call) error {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no endpoint %s %s (see controld/API.md)", c.r.Method, c.r.URL.Path)}
	})
}
