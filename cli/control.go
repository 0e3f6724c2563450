package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/publish"
)

// ControldFlags select controld for every command that talks to it. Its URL comes from
// --controld, else $ARMOR_CONTROLD_URL, else [controld] url in armor.toml.
type ControldFlags struct {
	Controld string `help:"controld URL; this flag, then $ARMOR_CONTROLD_URL, then [controld] url in armor.toml." env:"ARMOR_CONTROLD_URL" placeholder:"URL"`
	CACert   string `name:"ca-cert" help:"PEM CA certificate to trust for controld's TLS." type:"existingfile"`
}

// url is controld's URL: the flag (or $ARMOR_CONTROLD_URL) over armor.toml's.
func (f *ControldFlags) url(cfg *config.File) string {
	if f.Controld != "" || cfg == nil {
		return f.Controld
	}
	return cfg.Controld.URL
}

// urlSource names where url came from, for messages.
func (f *ControldFlags) urlSource(cfg *config.File) string {
	switch {
	case f.Controld == "":
		return "[controld] url in " + cfg.Path
	case os.Getenv("ARMOR_CONTROLD_URL") == f.Controld:
		return "$ARMOR_CONTROLD_URL"
	}
	return "--controld"
}

// ControlFlags select controld and the repository for the commands that talk to it.
// By default both come from armor.toml; the token comes from $ARMOR_TOKEN.
type ControlFlags struct {
	ControldFlags
	Repo string `help:"Repository (default: [repository] name in armor.toml)."`
}

// target resolves controld's URL, the token and the repository.
func (f *ControlFlags) target(g *Globals) (*client.Client, string, error) {
	var cfg *config.File
	if f.Controld == "" || f.Repo == "" {
		c, err := config.Load(g.Config)
		if err != nil {
			return nil, "", fmt.Errorf("%w (or pass --controld and --repo)", err)
		}
		cfg = c
	}
	url, repo := f.url(cfg), f.Repo
	if repo == "" {
		repo = cfg.Repository.Name
	}
	if url == "" {
		return nil, "", errors.New("no controld URL: set [controld] url in armor.toml, --controld or $ARMOR_CONTROLD_URL")
	}
	token := os.Getenv(config.DefaultTokenEnv)
	if cfg != nil {
		t, err := cfg.Token()
		if err != nil {
			return nil, "", err
		}
		token = t
	}
	hc, err := httpClient(f.CACert)
	if err != nil {
		return nil, "", err
	}
	return client.New(url, token, hc), repo, nil
}

// controlClient builds a client of the controld at url with armor.toml's token (used by
// push, which needs a token: it records).
func controlClient(cfg *config.File, url, caCert string) (*client.Client, error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, fmt.Errorf("no controld token: set $%s (or [controld] token_file in %s) to a token that may push to repository %s, or push with --store-only to upload without recording; nothing was uploaded",
			cfg.Controld.TokenEnv, cfg.Path, cfg.Repository.Name)
	}
	hc, err := httpClient(caCert)
	if err != nil {
		return nil, err
	}
	return client.New(url, token, hc), nil
}

// tokenSource names where armor.toml's token comes from, for messages.
func tokenSource(cfg *config.File) string {
	if cfg.Controld.TokenFile != "" {
		return "[controld] token_file " + cfg.Controld.TokenFile
	}
	return "$" + cfg.Controld.TokenEnv
}

func httpClient(caCert string) (*http.Client, error) {
	hc := &http.Client{Timeout: 60 * time.Second}
	if caCert == "" {
		return hc, nil
	}
	pem, err := os.ReadFile(caCert)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caCert)
	}
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return hc, nil
}

// ReleasesCmd groups release listing and deletion.
type ReleasesCmd struct {
	List   ReleasesListCmd   `cmd:"" default:"withargs" help:"List recorded releases, newest first."`
	Delete ReleasesDeleteCmd `cmd:"" help:"Delete a recorded release that is neither active, nor retained, nor the rollback target."`
}

// ReleasesListCmd lists releases.
type ReleasesListCmd struct {
	ControlFlags
}

// Run lists.
func (c *ReleasesListCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	rels, err := cl.Releases(g.ctx, repo)
	if err != nil {
		return err
	}
	// controld lists releases in the order it recorded them, oldest first; a person
	// (and a script taking the first entry) wants the latest first.
	slices.Reverse(rels)
	st, err := cl.Status(g.ctx, repo)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, rels)
	}
	active := ""
	if st.Active != nil {
		active = st.Active.Release
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tRELEASE\tPARENT\tBUILT\tPUSHED\tBY\tPACKAGES")
	for _, r := range rels {
		mark := ""
		if r.ID == active {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", mark, short(r.ID), short(r.Parent), r.Date, r.PushedAt.UTC().Format(time.RFC3339), r.PushedBy, r.Packages)
	}
	return tw.Flush()
}

// ActivateCmd activates a release.
type ActivateCmd struct {
	ControlFlags
	ID     string `arg:"" help:"Release id (or a unique prefix of it)."`
	Expect string `help:"The release you expect to be active now (default: whatever is active when the command starts)."`
	Force  bool   `help:"Activate the release even if it, or a release it is built on, was rolled back, or it was deleted, is not built on the active release or is older than it: go back knowingly."`
}

// Run activates.
func (c *ActivateCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	a, err := publish.Activate(g.ctx, cl, repo, c.ID, c.Expect, c.Force)
	if err != nil {
		return err
	}
	return printActivation(g, a)
}

func printActivation(g *Globals, a *api.Activation) error {
	if g.JSON {
		return printJSON(g.stdout, a)
	}
	verb := "activated"
	if a.Rollback {
		verb = "rolled back to"
	}
	from := short(a.From)
	if from == "" {
		from = "(none)"
	}
	fmt.Fprintf(g.stdout, "%s: %s %s (was %s), by %s at %s\n", a.Repository, verb, short(a.To), from, a.By, a.At.UTC().Format(time.RFC3339))
	return nil
}

// StatusCmd shows the active release.
type StatusCmd struct {
	ControlFlags
}

// Run shows status.
func (c *StatusCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	st, err := cl.Status(g.ctx, repo)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, st)
	}
	w := g.stdout
	fmt.Fprintf(w, "repository %s (%s)\n", st.Repository, strings.Join(st.Hostnames, ", "))
	if st.Active == nil {
		fmt.Fprintln(w, "  active: none (push a release, or activate a recorded one)")
	} else {
		fmt.Fprintf(w, "  active: %s since %s, by %s\n", st.Active.Release, st.Active.ActivatedAt.UTC().Format(time.RFC3339), st.Active.ActivatedBy)
	}
	switch {
	case st.PreviousRolledBack != nil:
		fmt.Fprintf(w, "  previous: %s, rolled back at %s by %s: armor rollback refuses it (armor activate --force re-activates it)\n",
			st.Previous, st.PreviousRolledBack.At.UTC().Format(time.RFC3339), st.PreviousRolledBack.By)
	case st.Previous != "":
		fmt.Fprintf(w, "  rollback would activate: %s\n", st.Previous)
	}
	for _, r := range st.Retained {
		fmt.Fprintf(w, "  retained: %s until %s\n", short(r.ID), r.Until.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  releases recorded: %d\n", st.Releases)
	return nil
}
