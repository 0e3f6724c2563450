package cli

import "github.com/alecthomas/kong"

// newParser builds armor's command-line parser over c, with extra options after armor's
// own. The tests that check every documented command line parse with it, so a flag added
// to a command is known to them at once; Main adds where output goes and how kong exits.
func newParser(c *CLI, extra ...kong.Option) (*kong.Kong, error) {
	opts := []kong.Option{
		kong.Name("armor"),
		kong.Description(description),
		kong.Vars{"version": currentVersion().String()},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	}
	return kong.New(c, append(opts, extra...)...)
}
