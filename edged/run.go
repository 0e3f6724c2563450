package edged

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/store"
)

// Store fetches are tried this many times (with backoff from storeRetryBase) before a
// miss is answered 503. They are the only retries: the store is opened with one attempt
// per request in rclone, since rclone's own retries stacked under these made a miss
// wait many seconds for its 503 while an S3 store was unreachable (docs/benchmarks.md).
const (
	storeAttempts  = 3
	storeRetryBase = 100 * time.Millisecond
)

// Run is the whole edge daemon: it opens cfg.Store (any rclone remote), creates the
// Edge, listens on cfg.Listen and cfg.AdminListen (and cfg.TLSListen, with certificates
// by ACME, when set), and syncs routes from controld until
// ctx is cancelled; then it shuts the listeners down gracefully and returns nil. It
// returns an error when something cannot start or a listener fails.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if cfg.Store == "" {
		return fmt.Errorf("edged config: store: the object store (an rclone remote) is required")
	}
	rc, err := store.OpenRcloneWith(ctx, cfg.Store, store.RcloneOptions{Attempts: 1})
	if err != nil {
		return err
	}
	e, err := New(cfg, store.WithRetry(rc, storeAttempts, storeRetryBase), logger)
	if err != nil {
		return err
	}
	defer e.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	aln, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen for admin: %w", err)
	}
	var tln net.Listener
	if cfg.TLSListen != "" {
		if tln, err = net.Listen("tcp", cfg.TLSListen); err != nil {
			ln.Close()
			aln.Close()
			return fmt.Errorf("listen for HTTPS: %w", err)
		}
		if err := e.EnableACME(ln.Addr(), tln.Addr()); err != nil {
			ln.Close()
			aln.Close()
			tln.Close()
			return err
		}
	}
	tlsAddr := "" // off
	if tln != nil {
		tlsAddr = tln.Addr().String()
	}
	logger.Info("edged listening", "listen", ln.Addr().String(), "admin", aln.Addr().String(),
		"tls", tlsAddr, "controld", cfg.Controld, "store", rc.String(), "routes_version", e.Version())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.Sync(gctx) })
	g.Go(func() error { return e.Serve(gctx, ln) })
	g.Go(func() error { return e.ServeAdmin(gctx, aln) })
	if tln != nil {
		g.Go(func() error { return e.ServeTLS(gctx, tln) })
	}
	return g.Wait()
}
