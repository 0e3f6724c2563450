package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/publish"
)

// GCCmd asks controld to collect the store's garbage.
type GCCmd struct {
	ControldFlags
	DryRun bool `name:"dry-run" help:"Report what would be deleted (releases, objects, bytes) and delete nothing."`
}

// Help is gc's detailed help: what is kept.
func (c *GCCmd) Help() string {
	return `controld forgets the releases no rule keeps, then deletes from the store every object that no recorded release references and that is older than its grace period (gc_grace in controld.toml, 24h by default, so the uploads of a push in progress survive). Always kept: each repository's active release, the one armor rollback would activate, and those deactivated within the repository's retention window, which edges still serve; controld.toml adds the last gc_keep_last active releases (3) and releases pushed without activation in the last gc_keep_drafts (168h). The store is shared by every repository, so the token needs the admin action on all of them ("*"). controld can also collect on its own every gc_interval.`
}

// Run collects.
func (c *GCCmd) Run(g *Globals) error {
	cl, err := c.adminClient(g)
	if err != nil {
		return err
	}
	rep, err := publish.GC(g.ctx, cl, c.DryRun)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, rep)
	}
	printGC(g, rep)
	return nil
}

func printGC(g *Globals, r *api.GCReport) {
	w := g.stdout
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	for _, rel := range r.Releases {
		fmt.Fprintf(w, "%s release %s of %s (pushed %s)\n", verb, short(rel.ID), rel.Repository, rel.PushedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "gc: %s %d releases and %d of %d objects (%s of %s); %d releases kept\n",
		verb, len(r.Releases), r.Deleted, r.Objects, humanBytes(r.DeletedBytes), humanBytes(r.Bytes), r.KeptReleases)
	fmt.Fprintf(w, "  referenced by recorded releases: %d objects (%s)\n", r.Referenced, humanBytes(r.ReferencedBytes))
	if r.Young > 0 {
		fmt.Fprintf(w, "  unreferenced but younger than %s, spared: %d objects (%s)\n", r.Grace, r.Young, humanBytes(r.YoungBytes))
	}
	if r.DryRun {
		fmt.Fprintln(w, "dry run: nothing was deleted")
	}
}

// ReleasesDeleteCmd deletes a release.
type ReleasesDeleteCmd struct {
	ControlFlags
	ID string `arg:"" help:"Release id (or a unique prefix of it)."`
}

// Help is releases delete's detailed help.
func (c *ReleasesDeleteCmd) Help() string {
	return `controld forgets the release: it is no longer listed, activated or rolled back to. It refuses the active release, the one armor rollback would activate, and releases deactivated within the repository's retention window (edges still serve their files). The release's objects leave the store at the next armor gc, unless a kept release shares them. Needs a token with the admin action on the repository.`
}

// Run deletes.
func (c *ReleasesDeleteCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	rel, err := publish.DeleteRelease(g.ctx, cl, repo, c.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, rel)
	}
	fmt.Fprintf(g.stdout, "%s: deleted release %s (pushed %s by %s); armor gc removes its objects\n",
		rel.Repository, short(rel.ID), rel.PushedAt.UTC().Format(time.RFC3339), rel.PushedBy)
	return nil
}

// adminClient is a client of controld for a command that names no repository: the URL
// from the flag, $ARMOR_CONTROLD_URL or armor.toml, the token from armor.toml's setting
// or $ARMOR_TOKEN. Its requests have no time limit: a collection lists the whole store.
func (f *ControldFlags) adminClient(g *Globals) (*client.Client, error) {
	var cfg *config.File
	if f.Controld == "" {
		c, err := config.Load(g.Config)
		if err != nil {
			return nil, fmt.Errorf("%w (or pass --controld)", err)
		}
		cfg = c
	}
	url := f.url(cfg)
	if url == "" {
		return nil, errors.New("no controld URL: set [controld] url in armor.toml, --controld or $ARMOR_CONTROLD_URL")
	}
	token := os.Getenv(config.DefaultTokenEnv)
	if cfg != nil {
		t, err := cfg.Token()
		if err != nil {
			return nil, err
		}
		token = t
	}
	if token == "" {
		return nil, fmt.Errorf("no controld token: set $%s to a token with the admin action on every repository", config.DefaultTokenEnv)
	}
	hc, err := httpClient(f.CACert)
	if err != nil {
		return nil, err
	}
	hc.Timeout = 0
	return client.New(url, token, hc), nil
}
