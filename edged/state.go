package edged

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// The state directory keeps what a restart needs to route without controld or the
// store:
//
//	<state_dir>/routes.json           the last applied routes feed (as edged read it:
//	                                  validated, without fields it does not know)
//	<state_dir>/manifests/<sha256>    every manifest that feed needs, as stored
//	<state_dir>/dates/<hash>.json     each repository's Last-Modified dates (dates.go)
//
// Manifests are written before routes.json names them, and every file is written
// atomically (temp file, fsync, rename, fsync of the directory).
const (
	routesFile     = "routes.json"
	manifestSubdir = "manifests"
	maxManifest    = 1 << 30
)

func manifestDir(stateDir string) string { return filepath.Join(stateDir, manifestSubdir) }

// loadState applies the routes kept on disk, if any, without pre-warming.
func (e *Edge) loadState(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(e.cfg.StateDir, routesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read kept routes: %w", err)
	}
	r, err := api.ParseRoutes(raw)
	if err != nil {
		return fmt.Errorf("kept routes %s: %w", filepath.Join(e.cfg.StateDir, routesFile), err)
	}
	// The routes were current when they were written, at the latest.
	seen := time.Time{}
	if fi, err := os.Stat(filepath.Join(e.cfg.StateDir, routesFile)); err == nil {
		seen = fi.ModTime()
	}
	return e.apply(ctx, r, seen, false, false)
}

// saveState writes the routes and removes kept manifests they no longer need.
func (e *Edge) saveState(r *api.Routes, needed map[string]bool) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode routes to keep: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(e.cfg.StateDir, routesFile), raw, 0o600); err != nil {
		return err
	}
	dir := manifestDir(e.cfg.StateDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list kept manifests: %w", err)
	}
	for _, ent := range entries {
		if !needed[ent.Name()] {
			if err := os.Remove(filepath.Join(dir, ent.Name())); err != nil {
				return fmt.Errorf("remove kept manifest: %w", err)
			}
		}
	}
	return nil
}

// loadRelease reads the manifest object sum from the state directory or, failing
// that, from the store (keeping a copy on disk), and checks its digest.
func (e *Edge) loadRelease(ctx context.Context, sum string) (*release, error) {
	var data []byte
	var name string
	if e.cfg.StateDir != "" {
		p := filepath.Join(manifestDir(e.cfg.StateDir), sum)
		if b, err := os.ReadFile(p); err == nil && digest(b) == sum {
			data, name = b, p
		}
	}
	if data == nil {
		b, err := e.fetchManifest(ctx, sum)
		if err != nil {
			return nil, err
		}
		data, name = b, "store object "+sum
		if e.cfg.StateDir != "" {
			if err := atomicfile.WriteFile(filepath.Join(manifestDir(e.cfg.StateDir), sum), data, 0o600); err != nil {
				e.logger.Warn("manifest could not be kept on disk", "manifest", sum, "err", err)
			}
		}
	}
	m, err := manifest.Parse(data, name)
	if err != nil {
		return nil, fmt.Errorf("load release manifest: %w", err)
	}
	rel := &release{sum: sum, m: m}
	if t, err := time.Parse(time.RFC3339, m.Date); err == nil {
		rel.date = t
	}
	return rel, nil
}

func (e *Edge) fetchManifest(ctx context.Context, sum string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.FetchTimeout.D())
	defer cancel()
	rc, err := e.store.Open(ctx, sum, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest %s: %w", sum, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest))
	if err != nil {
		return nil, fmt.Errorf("fetch manifest %s: %w", sum, err)
	}
	if digest(b) != sum {
		return nil, fmt.Errorf("fetch manifest %s: %w", sum, errCorrupt)
	}
	return b, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
