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
	"github.com/armor-apt/armor/debian/sign"
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
// controld marks the release it deactivates rolled back, so no push re-activates it by
// accident. Then the local manifest is made the active release's, so the next build
// starts from it; when that cannot be done the rollback stands, and the output says so.
func (c *RollbackCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	st, err := publish.Previous(g.ctx, cl, repo)
	if err != nil {
		return err
	}
	cfg, cfgErr := config.Load(g.Config)
	var a *api.Activation
	if c.PointerOnly {
		a, err = publish.RollbackPointer(g.ctx, cl, repo, st)
	} else {
		if cfgErr != nil {
			return fmt.Errorf("%w (a re-signed rollback needs armor.toml for the key and the store; --pointer-only does not)", cfgErr)
		}
		a, err = republish(g.ctx, cfg, c.url(cfg), cl, repo, st)
	}
	if err != nil {
		return err
	}
	if cfgErr != nil {
		cfg = nil
	}
	lm := followActive(g.ctx, cfg, g.Config, cl, repo, a.To)
	return printRollback(g, a, lm)
}

// localManifest says what armor rollback did to the local manifest.
type localManifest struct {
	Path    string `json:"path,omitempty"`
	Release string `json:"release"` // the active release
	Written bool   `json:"written"` // the manifest is now the active release's
	// Left, when not written, says why; the manifest is as it was.
	Left string `json:"left,omitempty"`
}

// followActive writes the manifest of the active release id, read from the store, over
// the local manifest, so the next build starts from it.
func followActive(ctx context.Context, cfg *config.File, cfgPath string, cl *client.Client, repo, id string) localManifest {
	lm := localManifest{Release: id}
	switch {
	case cfg == nil:
		lm.Left = "no armor.toml at " + cfgPath
		return lm
	case cfg.Repository.Name != repo:
		lm.Path = cfg.Resolve(cfg.Output.Manifest)
		lm.Left = fmt.Sprintf("it is a release of repository %s, not %s", cfg.Repository.Name, repo)
		return lm
	}
	lm.Path = cfg.Resolve(cfg.Output.Manifest)
	s, err := openStore(ctx, cfg)
	if err == nil {
		_, err = publish.WriteManifest(ctx, cl, s, repo, id, lm.Path, cfg.Resolve(cfg.Output.Cache))
	}
	if err != nil {
		lm.Left = err.Error()
		return lm
	}
	lm.Written = true
	return lm
}

// rollbackResult is what armor rollback --json prints: the activation, and what became
// of the local manifest.
type rollbackResult struct {
	*api.Activation
	LocalManifest localManifest `json:"local_manifest"`
}

func printRollback(g *Globals, a *api.Activation, lm localManifest) error {
	if g.JSON {
		return printJSON(g.stdout, rollbackResult{a, lm})
	}
	if err := printActivation(g, a); err != nil {
		return err
	}
	w := g.stdout
	fmt.Fprintf(w, "  release %s is marked rolled back: a push of it, or of a release built on it, is refused unless --force\n", short(a.From))
	switch {
	case lm.Written:
		fmt.Fprintf(w, "  local manifest %s now holds the active release %s: armor build starts from it\n", lm.Path, short(lm.Release))
	case lm.Path == "":
		fmt.Fprintf(w, "  local manifest not updated (%s): build from the manifest of the active release %s\n", lm.Left, short(lm.Release))
	default:
		fmt.Fprintf(w, "  local manifest %s NOT updated, left as it was: %s\n", lm.Path, lm.Left)
		fmt.Fprintf(w, "  before the next armor build, put the manifest of the active release %s there (from git, or the store object armor releases list --json names as its manifest), or builds on it will be refused\n", short(lm.Release))
	}
	return nil
}

// republish maps armor.toml onto publish.Republish: the store, the signing key and the
// cache that stages the re-signed files.
func republish(ctx context.Context, cfg *config.File, url string, cl *client.Client, repo string, st *api.Status) (*api.Activation, error) {
	cas, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	date, err := buildDate(nil)
	if err != nil {
		return nil, err
	}
	return publish.Republish(ctx, publish.RepublishOptions{
		Client: cl, URL: url, Repo: repo, Status: st, Store: cas,
		Key:   func() (*sign.Key, error) { return signingKey(cfg) },
		Hash:  signHash(cfg),
		Cache: cfg.Resolve(cfg.Output.Cache),
		Date:  date,
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
