package controld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/controld/state/postgres"
	"github.com/armor-apt/armor/store"
)

// Run is the control daemon: it opens the state (cfg.Database, else under cfg.DataDir) and the
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
	if cfg.DataDir == "" && cfg.Database == "" {
		return errors.New("controld config: data_dir is required (or database, a postgres:// URL)")
	}
	if cfg.Store == "" {
		return errors.New("controld config: store is required (an rclone remote, such as a local path or s3:bucket/prefix)")
	}
	st, err := OpenState(ctx, cfg.Database, cfg.DataDir)
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
		"state", st.String(), "store", cas.String())
	err = s.Serve(ctx, ln)
	logger.Info("controld stopped")
	return err
}

// StateStore is a state store that the caller closes.
type StateStore interface {
	state.Store
	Close() error
	String() string
}

// OpenState opens the state: the PostgreSQL database at database when it is set, else
// the bbolt file under dataDir (made if missing).
func OpenState(ctx context.Context, database, dataDir string) (StateStore, error) {
	if database != "" {
		if !postgres.IsURL(database) {
			return nil, errors.New("database must be a postgres:// (or postgresql://) URL")
		}
		return postgres.Open(ctx, database)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	st, err := bolt.Open(filepath.Join(dataDir, DBFile), nil)
	if err != nil {
		return nil, err
	}
	return boltState{st, filepath.Join(dataDir, DBFile)}, nil
}

type boltState struct {
	*bolt.Store
	path string
}

func (b boltState) String() string { return "bbolt " + b.path }
