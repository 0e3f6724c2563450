package cli

import (
	"bytes"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
)

// ReposCmd groups repository administration.
type ReposCmd struct {
	Create ReposCreateCmd `cmd:"" help:"Create the repository in controld, with its hostnames, public key and retention from armor.toml."`
	Show   ReposShowCmd   `cmd:"" help:"Show a repository."`
	List   ReposListCmd   `cmd:"" help:"List repositories."`
}

// ReposCreateCmd creates a repository.
type ReposCreateCmd struct {
	ControlFlags
	Hostname  []string `help:"Hostname (default: armor.toml's)."`
	Key       []string `help:"Armored public key file (default: the public key of armor.toml's signing key)." type:"existingfile"`
	Retention string   `help:"Retention window, e.g. 48h or 7d (default: armor.toml's, else controld's)."`
}

// Run creates the repository.
func (c *ReposCreateCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	req := api.CreateRepoRequest{Name: repo, Hostnames: c.Hostname}
	cfg, cfgErr := config.Load(g.Config)
	if len(req.Hostnames) == 0 && cfgErr == nil {
		req.Hostnames = cfg.Repository.Hostnames
	}
	for _, k := range c.Key {
		data, err := readFile(k)
		if err != nil {
			return err
		}
		req.Keys = append(req.Keys, string(data))
	}
	if len(req.Keys) == 0 {
		if cfgErr != nil {
			return fmt.Errorf("no --key given and armor.toml unreadable: %w", cfgErr)
		}
		k, err := signingKey(cfg)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := k.WritePublicArmored(&buf); err != nil {
			return err
		}
		req.Keys = []string{buf.String()}
	}
	ret := c.Retention
	if ret == "" && cfgErr == nil {
		ret = cfg.Repository.Retention
	}
	if ret != "" {
		d, err := config.PositiveDuration(ret)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		r := duration.Duration(d)
		req.Retention = &r
	}
	r, err := cl.CreateRepo(g.ctx, req)
	if err != nil {
		return err
	}
	return printRepo(g, r)
}

// ReposShowCmd shows one repository.
type ReposShowCmd struct {
	ControlFlags
}

// Run shows.
func (c *ReposShowCmd) Run(g *Globals) error {
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	r, err := cl.Repo(g.ctx, repo)
	if err != nil {
		return err
	}
	return printRepo(g, r)
}

func printRepo(g *Globals, r *api.Repository) error {
	if g.JSON {
		return printJSON(g.stdout, r)
	}
	w := g.stdout
	fmt.Fprintf(w, "repository %s\n  hostnames: %s\n  retention: %s\n", r.Name, strings.Join(r.Hostnames, ", "), r.Retention.D())
	for _, k := range r.Keys {
		fmt.Fprintf(w, "  key: %s %s\n", k.Fingerprint, strings.Join(k.UserIDs, "; "))
	}
	if r.Active != nil {
		fmt.Fprintf(w, "  active: %s since %s\n", r.Active.Release, r.Active.ActivatedAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "  active: none")
	}
	return nil
}

// ReposListCmd lists repositories.
type ReposListCmd struct {
	ControlFlags
}

// Run lists.
func (c *ReposListCmd) Run(g *Globals) error {
	c.Repo = "-" // no repository needed
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	rs, err := cl.Repos(g.ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, rs)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOSTNAMES\tACTIVE")
	for _, r := range rs {
		active := "-"
		if r.Active != nil {
			active = short(r.Active.Release)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, strings.Join(r.Hostnames, ","), active)
	}
	return tw.Flush()
}

// TokensCmd groups token administration.
type TokensCmd struct {
	Create TokensCreateCmd `cmd:"" help:"Create a token; its secret is printed once."`
	List   TokensListCmd   `cmd:"" help:"List tokens."`
	Revoke TokensRevokeCmd `cmd:"" help:"Revoke a token."`
}

// TokensCreateCmd creates a token.
type TokensCreateCmd struct {
	ControlFlags
	Name   string   `arg:"" help:"Token name (shown in audit history)."`
	Scope  []string `name:"for" help:"Repositories the token may act on, or '*' for all." required:""`
	Action []string `help:"Actions: read, push, activate, admin, certs (repeatable; certs, on '*' only: the edges' shared certificate storage)." required:"" enum:"read,push,activate,admin,certs"`
}

// Run creates.
func (c *TokensCreateCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	res, err := cl.CreateToken(g.ctx, c.Name, c.Scope, c.Action)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, res)
	}
	fmt.Fprintln(g.stdout, res.Secret)
	fmt.Fprintf(g.stderr, "token %s for %s, actions %s: the secret above is shown only once\n",
		res.Token.Name, strings.Join(res.Token.Repositories, ","), strings.Join(res.Token.Actions, ","))
	return nil
}

// TokensListCmd lists tokens.
type TokensListCmd struct {
	ControlFlags
}

// Run lists.
func (c *TokensListCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	ts, err := cl.Tokens(g.ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, ts)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREPOSITORIES\tACTIONS\tCREATED\tREVOKED")
	for _, t := range ts {
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Repositories, ","), strings.Join(t.Actions, ","), t.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

// TokensRevokeCmd revokes a token.
type TokensRevokeCmd struct {
	ControlFlags
	Name string `arg:"" help:"Token name."`
}

// Run revokes.
func (c *TokensRevokeCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	t, err := cl.RevokeToken(g.ctx, c.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, t)
	}
	fmt.Fprintf(g.stdout, "revoked token %s\n", t.Name)
	return nil
}
