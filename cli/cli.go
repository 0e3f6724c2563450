package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/armor-apt/armor/publish"
)

// Version is set at link time.
var Version = "dev"

// Globals are flags every command takes.
type Globals struct {
	Config string `short:"c" help:"Path of armor.toml." default:"armor.toml" type:"path" env:"ARMOR_CONFIG"`
	JSON   bool   `help:"Print machine-readable JSON instead of text."`

	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
}

// CLI is the armor command line.
type CLI struct {
	Globals

	Init     InitCmd     `cmd:"" help:"Create armor.toml and a signing key in the current directory."`
	Key      KeyCmd      `cmd:"" help:"Generate, import, export and list signing keys."`
	Build    BuildCmd    `cmd:"" help:"Build the signed dists/ + pool/ tree and the release manifest."`
	Push     PushCmd     `cmd:"" help:"Upload what the store lacks, then record (and activate) the release in controld."`
	Diff     DiffCmd     `cmd:"" help:"Compare two manifests: packages added, removed, upgraded, downgraded."`
	Verify   VerifyCmd   `cmd:"" help:"Check a tree (directory or URL) the way apt does."`
	Releases ReleasesCmd `cmd:"" help:"List the releases controld recorded."`
	Activate ActivateCmd `cmd:"" help:"Make a recorded release the active one."`
	Rollback RollbackCmd `cmd:"" help:"Re-activate the previously active release."`
	Status   StatusCmd   `cmd:"" help:"Show what is active, since when, and who made it so."`
	Store    StoreCmd    `cmd:"" help:"Check the object store: every object of the kept releases present and intact."`
	Repos    ReposCmd    `cmd:"" help:"Create, show and list repositories in controld."`
	Tokens   TokensCmd   `cmd:"" help:"Create, list and revoke controld tokens."`
	Controld ControldCmd `cmd:"" help:"Run the control daemon."`
	Edged    EdgedCmd    `cmd:"" help:"Run the edge server."`
	Version  VersionCmd  `cmd:"" help:"Print the version."`
}

// exitError carries an exit code chosen by a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitStaleParent: a push was refused because the release it was built on is not
	// the active release (another push won the race, or the manifest is stale); nothing
	// was activated. Rebuild on the active release and push again.
	exitStaleParent = 3
)

// Main runs armor with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c CLI
	c.ctx, c.stdout, c.stderr = ctx, stdout, stderr
	parser, err := kong.New(&c,
		kong.Name("armor"),
		kong.Description("armor publishes Debian (APT) repositories: armor build && armor push."),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(kongExit(code)) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "armor: %v\n", err)
		return exitFailure
	}
	code, done := func() (code int, done bool) {
		defer func() {
			if r := recover(); r != nil {
				if k, ok := r.(kongExit); ok {
					code, done = int(k), true
					return
				}
				panic(r)
			}
		}()
		kctx, err := parser.Parse(args)
		if err != nil {
			fmt.Fprintf(stderr, "armor: %v\n", err)
			return exitUsage, true
		}
		if err := kctx.Run(&c.Globals); err != nil {
			return report(stderr, err), true
		}
		return exitOK, true
	}()
	if !done {
		return exitFailure
	}
	return code
}

type kongExit int

// report prints err and returns the exit code it calls for.
func report(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "armor: %v\n", err)
	var ee *exitError
	var stale *publish.StaleParentError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &stale):
		return exitStaleParent
	}
	return exitFailure
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// VersionCmd prints the version.
type VersionCmd struct{}

// Run prints the version.
func (VersionCmd) Run(g *Globals) error {
	_, err := fmt.Fprintln(g.stdout, "armor", Version)
	return err
}
