package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/armor-apt/armor/publish"
)

// Globals are flags every command takes.
type Globals struct {
	Config      string           `short:"c" help:"Path of armor.toml." default:"armor.toml" type:"path" env:"ARMOR_CONFIG"`
	JSON        bool             `help:"Print machine-readable JSON instead of text; an error is then a JSON object on standard error."`
	ShowVersion kong.VersionFlag `name:"version" help:"Print the version and commit, and exit."`

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
	Add      AddCmd      `cmd:"" help:"Build a release that adds .deb files to the parent's packages."`
	Remove   RemoveCmd   `cmd:"" help:"Build a release without some of the parent's packages."`
	Copy     CopyCmd     `cmd:"" help:"Build a release that lists packages of one suite in another (promotion)."`
	Phase    PhaseCmd    `cmd:"" help:"Build a release in which a package version reaches only a share of machines (phased update)."`
	Push     PushCmd     `cmd:"" help:"Upload what the store lacks, then record (and activate) the release in controld."`
	Diff     DiffCmd     `cmd:"" help:"Compare two manifests or recorded releases: packages added, removed, upgraded, downgraded."`
	Verify   VerifyCmd   `cmd:"" help:"Check a tree (directory or URL) the way apt does."`
	Check    CheckCmd    `cmd:"" help:"Check that every binary package of the release can be installed (as dose-distcheck does)."`
	Rebuild  RebuildCmd  `cmd:"" help:"Rebuild a release from its parent and change, and compare it byte for byte."`
	Export   ExportCmd   `cmd:"" help:"Write a release's whole dists/ + pool/ tree from the store into a directory, for a static mirror."`
	Releases ReleasesCmd `cmd:"" help:"List the releases controld recorded."`
	Activate ActivateCmd `cmd:"" help:"Make a recorded release the active one."`
	Rollback RollbackCmd `cmd:"" help:"Re-activate the previously active release."`
	Status   StatusCmd   `cmd:"" help:"Show what is active, since when, and who made it so."`
	Store    StoreCmd    `cmd:"" help:"Check the object store: every object of the kept releases present and intact."`
	GC       GCCmd       `cmd:"" name:"gc" help:"Delete what no kept release references from the object store (controld does it)."`
	Repos    ReposCmd    `cmd:"" help:"Create, show and list repositories in controld."`
	Tokens   TokensCmd   `cmd:"" help:"Create, list and revoke controld tokens."`
	Hooks    HooksCmd    `cmd:"" help:"Add, list and remove webhooks (signed POSTs on record, activate, rollback, gc and key events); read their delivery log."`
	Controld ControldCmd `cmd:"" help:"Run the control daemon."`
	Edged    EdgedCmd    `cmd:"" help:"Run the edge server."`
	CDN      CDNCmd      `cmd:"" name:"cdn" help:"Keep a CDN in front of the edges in step: armor cdn purger."`
	Version  VersionCmd  `cmd:"" help:"Print the version."`
}

// exitError carries an exit code chosen by a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes, as description (armor --help) and the README document them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitStaleParent: a push was refused because the release it was built on is not
	// the active release (another push won the race, or the manifest is stale); nothing
	// was activated. Rebuild on the active release and push again.
	exitStaleParent = 3
	// exitRolledBack: an activation (push, activate, rollback) was refused because the
	// release, or one it is built on, was rolled back; nothing was activated. Build on the
	// active release, or pass --force to re-activate it knowingly.
	exitRolledBack = 4
)

// description heads armor --help; it documents the exit status and the --json errors.
var description = fmt.Sprintf(`armor publishes Debian (APT) repositories: armor build && armor push.

Exit status: %d success; %d error; %d usage error (unknown command or flag, missing or bad argument); %d a push refused because the release it was built on is no longer the active one (armor push --rebase, or armor build --from-active and push again); %d an activation (push, activate, rollback) refused because the release, or one it is built on, was rolled back (armor push --rebase or armor build --from-active to build on the active release, or --force to re-activate it knowingly).

With --json, a command that fails prints one JSON object on standard error, {"error": "...", "exit_code": N}; standard output keeps only the command's own result.`,
	exitOK, exitFailure, exitUsage, exitStaleParent, exitRolledBack)

// Main runs armor with args and returns the process exit code. It is the one place that
// turns an error into what the user sees and the exit code that follows.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c CLI
	c.ctx, c.stdout, c.stderr = ctx, stdout, stderr
	parser, err := newParser(&c,
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(kongExit(code)) }),
	)
	if err != nil {
		return report(stderr, false, err)
	}
	if len(args) == 0 {
		// As restic (and every cobra program) does: a bare armor is a request for help,
		// answered on standard output with status 0.
		args = []string{"--help"}
	}
	err = run(parser, &c, args)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// SIGTERM is how CI cancels a job: say so, rather than "context canceled".
		err = fmt.Errorf("interrupted (%w): stopped before it finished; every write is atomic, so nothing half-done is visible: run the command again to finish", err)
	}
	return report(stderr, c.JSON || wantsJSON(args), err)
}

// run parses args and runs the command. kong's own exits (--help, --version) come back
// as a nil error, or an exitError with their code.
func run(parser *kong.Kong, c *CLI, args []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			k, ok := r.(kongExit)
			if !ok {
				panic(r)
			}
			err = nil
			if k != exitOK {
				err = &exitError{kongCode(int(k)), fmt.Errorf("exit status %d", int(k))}
			}
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		// Every parse error is a usage error; kong would exit 80 for most of them.
		return &exitError{exitUsage, err}
	}
	return kctx.Run(&c.Globals)
}

type kongExit int

// kongUsage is the status kong exits with on a usage error (kong's exitUsageError).
const kongUsage = 80

// kongCode maps a status kong chose onto armor's: its usage error is ours, 2.
func kongCode(code int) int {
	if code == kongUsage {
		return exitUsage
	}
	return code
}

// wantsJSON reports whether args ask for --json, for errors that come before (or
// instead of) kong setting Globals.JSON: a usage error still answers in JSON.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}

// errorJSON is what a failed command prints on standard error under --json.
type errorJSON struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// report prints err (as text, or as one JSON object when asJSON) on stderr and returns
// the exit code it calls for: 0 for no error.
func report(stderr io.Writer, asJSON bool, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if asJSON {
		enc := json.NewEncoder(stderr)
		enc.SetEscapeHTML(false)
		if enc.Encode(errorJSON{Error: err.Error(), ExitCode: code}) == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "armor: %v\n", err)
	return code
}

// exitCode is the exit status err calls for.
func exitCode(err error) int {
	var ee *exitError
	var stale *publish.StaleParentError
	var rolledBack *publish.RolledBackError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &stale):
		return exitStaleParent
	case errors.As(err, &rolledBack):
		return exitRolledBack
	}
	return exitFailure
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
