package cli

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/gen/sign"
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
	st, err := publish.Previous(g.ctx, cl, repo)
	if err != nil {
		return err
	}
	if c.PointerOnly {
		a, err := publish.RollbackPointer(g.ctx, cl, repo, st)
		if err != nil {
			return err
		}
		return printActivation(g, a)
	}
	cfg, err := config.Load(g.Config)
	if err != nil {
		return fmt.Errorf("%w (a re-signed rollback needs armor.toml for the key and the store; --pointer-only does not)", err)
	}
	a, err := republish(g.ctx, cfg, c.url(cfg), cl, repo, st)
	if err != nil {
		return err
	}
	return printActivation(g, a)
}

// republish maps armor.toml onto publish.Republish: the store, the signing key and the
// cache that stages the re-signed files.
func republish(ctx context.Context, cfg *config.File, url string, cl *client.Client, repo string, st *api.Status) (*api.Activation, error) {
	cas, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return publish.Republish(ctx, publish.RepublishOptions{
		Client: cl, URL: url, Repo: repo, Status: st, Store: cas,
		Key:   func() (*sign.Key, error) { return signingKey(cfg) },
		Hash:  signHash(cfg),
		Cache: cfg.Resolve(cfg.Output.Cache),
	})
}

func signHash(cfg *config.File) crypto.Hash {
	if strings.EqualFold(cfg.Signing.Digest, "SHA256") {
		return crypto.SHA256
	}
	return crypto.SHA512
}

// openStore opens the store armor.toml names.
func openStore(ctx context.Context, cfg *config.File) (store.Store, error) {
	s, err := publish.OpenStore(ctx, cfg.Remote())
	if errors.Is(err, publish.ErrNoStore) {
		return nil, noStoreError(cfg)
	}
	return s, err
}

// noStoreError says that armor.toml names no store, and how to name one.
func noStoreError(cfg *config.File) error {
	return fmt.Errorf("%s: no [store] configured: set store.remote (a directory or an rclone remote) or [store.s3]", cfg.Path)
}
