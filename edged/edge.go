package edged

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"

	"github.com/armor-apt/armor/edged/internal/connpoll"
	"github.com/armor-apt/armor/store"
)

// Edge serves repositories' trees by hostname. Create it with New, keep its routes in
// sync with Sync, and serve with Serve and ServeAdmin; Run does all of that from a
// Config.
type Edge struct {
	cfg       Config
	token     string
	store     store.Store
	logger    *slog.Logger
	access    *slog.Logger
	accessOut io.Closer
	threshold int64
	objects   *objects
	disk      *diskCache // objects over threshold, verified on disk (disk.go)
	m         *metrics
	client    *http.Client
	base      context.Context
	cancel    context.CancelFunc

	table atomic.Pointer[table]
	feed  feedHealth
	// replica counts the controld replicas given up on: the next poll goes to
	// controldURLs(cfg.Controld)[replica % their number].
	replica atomic.Uint64
	acme    *acmeTLS // set by EnableACME; nil serves plain HTTP only

	// draining is set when a public listener begins its graceful shutdown: /readyz
	// answers 503 from then on. serving counts the public listeners still serving; the
	// admin listener outlives them, so a balancer sees the drain.
	draining atomic.Bool
	serving  atomic.Int32
	// caughtUp is set once Sync's first poll of controld has ended, applied or failed:
	// routes loaded from state_dir may be older than what the other edges serve, so
	// /readyz waits for it.
	caughtUp  atomic.Bool
	probeNext atomic.Uint64 // the site whose manifest /healthz asks the store for next

	applyMu  sync.Mutex          // serialises apply
	releases map[string]*release // loaded manifests by object digest; under applyMu
}

// New creates an edge over store. cfg's zero fields take their defaults. When
// cfg.StateDir holds routes from an earlier run, they are loaded at once (their
// manifests from the state directory, else from the store), so the edge can serve
// before controld answers; a failure to load them is logged, not returned.
func New(cfg Config, cas store.Store, logger *slog.Logger) (*Edge, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("edged config: %w", err)
	}
	token, err := cfg.token()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Edge{
		cfg:       cfg,
		token:     token,
		store:     cas,
		logger:    logger,
		threshold: int64(cfg.StreamThreshold),
		m:         newMetrics(),
		client:    &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		releases:  map[string]*release{},
	}
	e.feed.since.Store(time.Now().UnixNano())
	e.base, e.cancel = context.WithCancel(context.Background())
	if e.objects, err = newObjects(e.base, cas, cfg.CacheSize, cfg.FetchTimeout.D(), e.m); err != nil {
		e.cancel()
		return nil, err
	}
	if e.disk, err = newDiskCache(e.base, cfg.diskCacheDir(), int64(cfg.DiskCacheSize), cas, cfg.FetchTimeout.D(), e.m, logger); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.openAccessLog(); err != nil {
		e.Close()
		return nil, err
	}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(manifestDir(cfg.StateDir), 0o755); err != nil {
			e.Close()
			return nil, fmt.Errorf("create edged state directory: %w", err)
		}
		if err := e.loadState(e.base); err != nil {
			logger.Warn("routes kept on disk could not be loaded; waiting for controld", "err", err)
		}
	}
	return e, nil
}

func (e *Edge) openAccessLog() error {
	var w io.Writer
	switch e.cfg.AccessLog {
	case "":
		return nil
	case "-":
		w = os.Stdout
	default:
		f, err := os.OpenFile(e.cfg.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open access log: %w", err)
		}
		w, e.accessOut = f, f
	}
	e.access = slog.New(slog.NewJSONHandler(w, nil))
	return nil
}

// Close releases the cache and the access log. Call it after Serve and Sync returned.
func (e *Edge) Close() error {
	e.cancel()
	if e.acme != nil {
		e.acme.stop()
	}
	if e.objects != nil {
		e.objects.close()
	}
	if e.disk != nil {
		e.disk.close()
	}
	if e.accessOut != nil {
		return e.accessOut.Close()
	}
	return nil
}

// Version returns the routes version being served; 0 before any routes are loaded.
func (e *Edge) Version() uint64 {
	if t := e.table.Load(); t != nil {
		return t.version
	}
	return 0
}

// Handler returns the public fasthttp handler (Serve uses it).
func (e *Edge) Handler() fasthttp.RequestHandler { return e.handle }

// Serve serves the public listener until ctx is cancelled, then shuts down gracefully
// (in-flight requests finish within Config.ShutdownTimeout) and returns nil. After
// EnableACME it also answers the CA's HTTP-01 challenges for routed hostnames.
func (e *Edge) Serve(ctx context.Context, ln net.Listener) error {
	return e.serveListener(ctx, ln, e.plainHandler(), nil)
}

// serveListener serves handler on ln, over TLS when tlsCfg is not nil (then always in
// Go's poller), and shuts down as Serve says.
func (e *Edge) serveListener(ctx context.Context, ln net.Listener, handler fasthttp.RequestHandler, tlsCfg *tls.Config) error {
	errorHandler := e.handleParseError
	if tlsCfg != nil {
		errorHandler = e.handleTLSError
	}
	srv := &fasthttp.Server{
		Handler:                      handler,
		ErrorHandler:                 errorHandler,
		Name:                         "armor-edged",
		ReadBufferSize:               8 << 10,
		WriteBufferSize:              64 << 10,
		MaxRequestBodySize:           4 << 10,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{e.logger},
	}
	inner, stop := ln, func() {}
	if tlsCfg == nil {
		inner, stop = e.connListener(ln)
	}
	// Closes the connections that outlive the shutdown timeout.
	defer stop()
	if inner == ln {
		// Go's poller: fasthttp enforces RequestTimeout. A new connection has it to
		// send a whole request; a keep-alive connection has it to start the next one,
		// and the request then has it again from its first byte.
		srv.ReadTimeout = e.cfg.RequestTimeout.D()
		srv.IdleTimeout = e.cfg.RequestTimeout.D()
	}
	tl := newTrackingListener(inner)
	var served net.Listener = tl
	if tlsCfg != nil {
		// Tracking below TLS: a connection that has sent nothing, not even a
		// ClientHello, is unused.
		served = tls.NewListener(tl, tlsCfg)
	}
	errc := make(chan error, 1)
	e.serving.Add(1)
	defer e.serving.Add(-1)
	go func() { errc <- srv.Serve(served) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	e.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout.D())
	defer cancel()
	stopped := make(chan struct{})
	go tl.closeUnusedUntil(stopped, 50*time.Millisecond)
	err := srv.ShutdownWithContext(sctx)
	close(stopped)
	if err != nil {
		// fasthttp gives up at the timeout but leaves the connections still serving open
		// (Go's poller; edged's own closes them in stop): close them, so no handler
		// outlives Serve by more than a failed write.
		tl.closeAll()
	}
	<-errc
	if err != nil {
		return fmt.Errorf("shut down %s: %w", ln.Addr(), err)
	}
	return nil
}

// connListener returns what the public connections are accepted from: ln itself (Go's
// poller, the default), or with conn_poller = "edged" a connpoll.Listener over it,
// whose connections enforce RequestTimeout themselves; stop releases it once serving
// ended. If edged's poller cannot start, Go's is used and a warning logged.
func (e *Edge) connListener(ln net.Listener) (inner net.Listener, stop func()) {
	if e.cfg.ConnPoller != "edged" {
		return ln, func() {}
	}
	pl, err := connpoll.NewListener(ln, e.cfg.RequestTimeout.D())
	if err != nil {
		e.logger.Warn("connections wait in Go's poller instead of edged's", "err", err)
		return ln, func() {}
	}
	return pl, pl.Stop
}

// handleParseError answers requests fasthttp could not read: 431 for oversized
// headers, 408 for a read timeout, 400 for the rest (among them HTTP/1.1 without Host).
func (e *Edge) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	he := errBadRequest
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		he = errHeaderTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		he = errTimeout
	}
	e.m.request(ctx.Method(), fail(ctx, he))
	e.logger.Debug("unreadable request", "remote", ctx.RemoteAddr().String(), "err", err)
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug(fmt.Sprintf(format, args...))
}

// AdminHandler returns the admin endpoints: /healthz, /readyz and /metrics.
func (e *Edge) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", e.healthz)
	mux.HandleFunc("GET /readyz", e.readyz)
	return mux
}

// ServeAdmin serves AdminHandler on ln until ctx is cancelled, then shuts down
// gracefully and returns nil. It shuts down after the public listeners have (within
// Config.ShutdownTimeout), so /readyz answers "shutting down" while they drain.
func (e *Edge) ServeAdmin(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: e.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve admin %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout.D())
	defer cancel()
	for e.serving.Load() > 0 && sctx.Err() == nil {
		sleepCtx(sctx, 10*time.Millisecond)
	}
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down admin %s: %w", ln.Addr(), err)
	}
	return nil
}
