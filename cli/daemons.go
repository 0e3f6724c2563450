package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/edged"
)

// ControldCmd runs or administers the control daemon.
type ControldCmd struct {
	Run     ControldRunCmd     `cmd:"" default:"withargs" help:"Run the control daemon."`
	Token   ControldTokenCmd   `cmd:"" help:"Create a token offline, in the data directory or the database (how the first admin token is made)."`
	Migrate ControldMigrateCmd `cmd:"" help:"Copy controld's state from a bbolt file into an empty PostgreSQL database."`
}

// ControldRunCmd runs controld.
type ControldRunCmd struct {
	ConfigFile string `name:"config-file" help:"controld.toml." type:"existingfile"`
	Listen     string `help:"Listen address (overrides the file)."`
	DataDir    string `help:"Data directory (overrides the file)."`
	Database   string `help:"State in PostgreSQL, a postgres:// URL (overrides the file; the password from PGPASSWORD or ~/.pgpass)."`
	Store      string `help:"Object store, an rclone remote (overrides the file)."`
	TLSCert    string `name:"tls-cert" help:"TLS certificate (PEM)."`
	TLSKey     string `name:"tls-key" help:"TLS key (PEM)."`
	LogFormat  string `help:"Log format: text or json." default:"text" enum:"text,json"`
}

// Run runs until SIGINT or SIGTERM.
func (c *ControldRunCmd) Run(g *Globals) error {
	var cfg controld.Config
	if c.ConfigFile != "" {
		var err error
		if cfg, err = controld.LoadConfig(c.ConfigFile); err != nil {
			return err
		}
	}
	override(&cfg.Listen, c.Listen)
	override(&cfg.DataDir, c.DataDir)
	override(&cfg.Database, c.Database)
	override(&cfg.Store, c.Store)
	override(&cfg.TLSCert, c.TLSCert)
	override(&cfg.TLSKey, c.TLSKey)
	return controld.Run(g.ctx, cfg, newLogger(g, c.LogFormat))
}

// ControldTokenCmd creates a token offline.
type ControldTokenCmd struct {
	DataDir  string   `help:"controld's data directory (its bbolt state)." xor:"state" required:""`
	Database string   `help:"controld's PostgreSQL state, a postgres:// URL (the password from PGPASSWORD or ~/.pgpass)." xor:"state" required:""`
	Name     string   `arg:"" help:"Token name."`
	Scope    []string `name:"for" help:"Repositories, or '*'." default:"*"`
	Action   []string `help:"Actions: read, push, activate, admin, certs." default:"admin" enum:"read,push,activate,admin,certs"`
}

// Run creates the token and prints its secret.
func (c *ControldTokenCmd) Run(g *Globals) error {
	secret, err := controld.CreateTokenIn(g.ctx, c.Database, c.DataDir, c.Name, c.Scope, c.Action)
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, secret)
	return nil
}

// EdgedCmd runs the edge.
type EdgedCmd struct {
	ConfigFile  string `name:"config-file" help:"edged.toml." type:"existingfile"`
	Listen      string `help:"Public listen address (overrides the file)."`
	AdminListen string `help:"Admin listen address for /healthz and /metrics (overrides the file)."`
	Controld    string `help:"controld URL (overrides the file)."`
	Store       string `help:"Object store, an rclone remote (overrides the file)."`
	StateDir    string `help:"State directory for the last known routes (overrides the file)."`
	LogFormat   string `help:"Log format: text or json." default:"text" enum:"text,json"`
}

// Run runs until SIGINT or SIGTERM. The read-only token comes from token_file or
// $ARMOR_EDGE_TOKEN.
func (c *EdgedCmd) Run(g *Globals) error {
	cfg := edged.Defaults()
	if c.ConfigFile != "" {
		var err error
		if cfg, err = edged.LoadConfig(c.ConfigFile); err != nil {
			return err
		}
	}
	override(&cfg.Listen, c.Listen)
	override(&cfg.AdminListen, c.AdminListen)
	override(&cfg.Controld, c.Controld)
	override(&cfg.Store, c.Store)
	override(&cfg.StateDir, c.StateDir)
	if cfg.Token == "" && cfg.TokenFile == "" {
		cfg.Token = os.Getenv("ARMOR_EDGE_TOKEN")
	}
	return edged.Run(g.ctx, cfg, newLogger(g, c.LogFormat))
}

func override(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func newLogger(g *Globals, format string) *slog.Logger {
	if strings.EqualFold(format, "json") {
		return slog.New(slog.NewJSONHandler(g.stderr, nil))
	}
	return slog.New(slog.NewTextHandler(g.stderr, nil))
}

// ControldMigrateCmd copies controld's state from bbolt into PostgreSQL.
type ControldMigrateCmd struct {
	From string `help:"The state to copy: bolt:PATH (controld.db, or the data directory holding it)." required:""`
	To   string `help:"The empty PostgreSQL database to copy it into, a postgres:// URL (the password from PGPASSWORD or ~/.pgpass)." required:""`
}

// Run copies the state and says what it copied.
func (c *ControldMigrateCmd) Run(g *Globals) error {
	m, err := controld.Migrate(g.ctx, c.From, c.To)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "migrated %s\n", m)
	return nil
}
