package cli

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// RollbackCmd rolls back.
type RollbackCmd struct {
	ControlFlags
	PointerOnly bool `help:"Only flip the pointer back to the previous release, without re-signing. apt clients that already fetched the newer InRelease ignore an older one, so use this only when no client has seen the bad release."`
}

// Run serves the previously active release again. By default it re-publishes that
// release's content with freshly dated and signed Release files (a new release whose
// parent is the current one), because apt ignores an InRelease older than the one it
// already has: a bare pointer flip would leave updated clients on the bad release.
func (c *RollbackCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	st, err := cl.Status(g.ctx, repo)
	if err != nil {
		return err
	}
	if st.Active == nil || st.Previous == "" {
		return fmt.Errorf("repository %s has no previous release to roll back to", repo)
	}
	if c.PointerOnly {
		a, err := cl.Rollback(g.ctx, repo, st.Active.Release)
		if err != nil {
			return err
		}
		return printActivation(g, a)
	}
	cfg, err := config.Load(g.Config)
	if err != nil {
		return fmt.Errorf("%w (a re-signed rollback needs armor.toml for the key and the store; --pointer-only does not)", err)
	}
	a, err := republish(g.ctx, cfg, cl, repo, st)
	if err != nil {
		return err
	}
	return printActivation(g, a)
}

// republish makes a new release with the previous release's packages and indexes and
// freshly signed Release files, and activates it in place of the current one.
func republish(ctx context.Context, cfg *config.File, cl *client.Client, repo string, st *api.Status) (*api.Activation, error) {
	cas, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	prevRel, err := cl.Release(ctx, repo, st.Previous)
	if err != nil {
		return nil, err
	}
	curRel, err := cl.Release(ctx, repo, st.Active.Release)
	if err != nil {
		return nil, err
	}
	prev, err := fetchManifest(ctx, cas, prevRel.Manifest)
	if err != nil {
		return nil, err
	}
	cur, err := fetchManifest(ctx, cas, curRel.Manifest)
	if err != nil {
		return nil, err
	}
	pass, err := cfg.Passphrase()
	if err != nil {
		return nil, err
	}
	key, err := loadKey(cfg.Resolve(cfg.Signing.Key), pass)
	if err != nil {
		return nil, err
	}
	hash := signHash(cfg)
	// The new Date must be later than every Date apt may hold: the current release's.
	date := time.Now().UTC().Truncate(time.Second)
	paths := cur.Paths()
	for p, o := range paths {
		if strings.HasSuffix(p, "/Release") && strings.HasPrefix(p, "dists/") {
			data, err := fetchObject(ctx, cas, o.SHA256)
			if err != nil {
				return nil, err
			}
			if d, err := gen.ReleaseDate(data); err == nil && !date.After(d) {
				date = d.Add(time.Second)
			}
		}
	}
	cacheDir := cfg.Resolve(cfg.Output.Cache)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(cacheDir, "rollback-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	var uploads []publish.Upload
	stage := func(data []byte) (manifest.File, error) {
		sum := sha256.Sum256(data)
		hexsum := hex.EncodeToString(sum[:])
		path := filepath.Join(staging, hexsum)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return manifest.File{}, err
		}
		uploads = append(uploads, publish.Upload{SHA256: hexsum, Size: int64(len(data)), Path: path})
		return manifest.File{Size: int64(len(data)), SHA256: hexsum}, nil
	}
	next := *prev
	next.Files = append([]manifest.File(nil), prev.Files...)
	byPath := map[string]int{}
	for i, f := range next.Files {
		byPath[f.Path] = i
	}
	for _, f := range prev.Files {
		if !strings.HasPrefix(f.Path, "dists/") || !strings.HasSuffix(f.Path, "/Release") {
			continue
		}
		dist := strings.TrimSuffix(f.Path, "Release")
		old, err := fetchObject(ctx, cas, f.SHA256)
		if err != nil {
			return nil, err
		}
		release, err := gen.Redate(old, date)
		if err != nil {
			return nil, fmt.Errorf("%s of release %s: %w", f.Path, short(prev.ID), err)
		}
		inRelease, detached, err := key.SignRelease(release, hash)
		if err != nil {
			return nil, err
		}
		for name, data := range map[string][]byte{"Release": release, "InRelease": inRelease, "Release.gpg": detached} {
			nf, err := stage(data)
			if err != nil {
				return nil, err
			}
			nf.Path = dist + name
			if i, ok := byPath[nf.Path]; ok {
				next.Files[i] = nf
			} else {
				next.Files = append(next.Files, nf)
			}
		}
	}
	next.Parent = cur.ID
	next.Date = date.Format(time.RFC3339)
	if err := manifest.Seal(&next); err != nil {
		return nil, err
	}
	mdata, err := manifest.Marshal(&next)
	if err != nil {
		return nil, err
	}
	mf, err := stage(mdata)
	if err != nil {
		return nil, err
	}
	if _, err := publish.UploadMissing(ctx, cas, uploads, publish.UploadOptions{}); err != nil {
		return nil, fmt.Errorf("push re-signed release to %s: %w", cas, err)
	}
	rr, err := cl.RecordRelease(ctx, repo, mf.SHA256, true, cur.ID)
	if err != nil {
		return nil, controldError(cfg.Controld.URL, repo, err)
	}
	if rr.Activation == nil {
		return nil, fmt.Errorf("controld recorded the rollback release %s but did not activate it", short(next.ID))
	}
	a := *rr.Activation
	a.Rollback = true
	return &a, nil
}

func signHash(cfg *config.File) crypto.Hash {
	if strings.EqualFold(cfg.Signing.Digest, "SHA256") {
		return crypto.SHA256
	}
	return crypto.SHA512
}

func openStore(ctx context.Context, cfg *config.File) (store.Store, error) {
	remote := cfg.Remote()
	if remote == "" {
		return nil, fmt.Errorf("%s: no [store] configured: set store.remote (a directory or an rclone remote) or [store.s3]", cfg.Path)
	}
	rs, err := store.OpenRclone(ctx, remote)
	if err != nil {
		return nil, err
	}
	return store.WithRetry(rs, storeAttempts, 200*time.Millisecond), nil
}

func fetchObject(ctx context.Context, cas store.Store, sum string) ([]byte, error) {
	rc, err := cas.Open(ctx, sum, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("read object %s from %s: %w", sum, cas, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read object %s from %s: %w", sum, cas, err)
	}
	if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != sum {
		return nil, fmt.Errorf("object %s in %s: %w", sum, cas, store.ErrDigestMismatch)
	}
	return data, nil
}

func fetchManifest(ctx context.Context, cas store.Store, sum string) (*manifest.Manifest, error) {
	data, err := fetchObject(ctx, cas, sum)
	if err != nil {
		return nil, err
	}
	return manifest.Parse(data, "store object "+sum)
}
