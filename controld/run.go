package controld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/store"
)

// Run is the control daemon: it opens the state database under cfg.DataDir and the
// object store cfg.Store, listens on cfg.Listen and serves until ctx is cancelled, then
// shuts down gracefully. It logs "controld listening" with the address once it accepts
// connections.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = logger
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return fmt.Errorf("controld config: %w", err)
	}
	if cfg.DataDir == "" {
		return errors.New("controld config: data_dir is required")
	}
	if cfg.Store == "" {
		return errors.New("controld config: store is required (an rclone remote, such as a local path or s3:bucket/prefix)")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	st, err := bolt.Open(filepath.Join(cfg.DataDir, DBFile), nil)
	if err != nil {
		return err
	}
	defer st.Close()
	cas, err := store.OpenRclone(ctx, cfg.Store)
	if err != nil {
		return fmt.Errorf("open object store: %w", err)
	}
	s, err := NewServer(cfg, cas, st)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("controld listening", "addr", ln.Addr().String(), "tls", cfg.TLSCert != "",
		"data_dir", cfg.DataDir, "store", cas.String())
	err = s.Serve(ctx, ln)
	logger.Info("controld stopped")
	return err
}
