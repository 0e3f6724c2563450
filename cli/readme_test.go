package cli

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestREADMECommands checks every armor command line in the README's shell blocks against
// the real command model: each subcommand exists and each --flag belongs to it. The
// commands themselves run in the end-to-end test and the demo.
func TestREADMECommands(t *testing.T) {
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c CLI
	parser, err := kong.New(&c, kong.Name("armor"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	inShell, n, checked := false, 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			inShell = line == "```sh"
			continue
		}
		if !inShell {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		for _, part := range strings.Split(line, "&&") {
			fields := strings.Fields(part)
			for len(fields) > 0 && strings.Contains(fields[0], "=") {
				fields = fields[1:] // VAR=value prefixes
			}
			if len(fields) == 0 || fields[0] != "armor" {
				continue
			}
			checked++
			if err := checkCommand(parser.Model.Node, fields[1:]); err != "" {
				t.Errorf("README.md:%d: %q: %s", n, strings.TrimSpace(part), err)
			}
		}
	}
	for _, bad := range [][]string{{"push", "--bogus"}, {"frobnicate"}, {"repos"}, {"key", "generate", "--algo", "x", "--nope"}} {
		if checkCommand(parser.Model.Node, bad) == "" {
			t.Errorf("checkCommand accepted %q", bad)
		}
	}
	if checked < 10 {
		t.Fatalf("found only %d armor commands in README.md; the parser is broken", checked)
	}
}

func checkCommand(node *kong.Node, args []string) string {
	path := []*kong.Node{node}
	positional := false
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !hasFlag(path, name) {
				return "unknown flag --" + name + " for " + node.Path()
			}
			continue
		}
		if strings.HasPrefix(a, "-") || positional {
			continue
		}
		var next *kong.Node
		for _, ch := range node.Children {
			if ch.Name == a {
				next = ch
			}
		}
		if next == nil {
			if len(node.Children) > 0 && node.DefaultCmd == nil {
				return "unknown command " + a + " under " + node.Path()
			}
			positional = true
			continue
		}
		node = next
		path = append(path, node)
	}
	if len(node.Children) > 0 && node.DefaultCmd == nil {
		return node.Path() + " needs a subcommand"
	}
	return ""
}

func hasFlag(path []*kong.Node, name string) bool {
	for _, n := range path {
		for _, f := range n.Flags {
			if f.Name == name {
				return true
			}
		}
		if n.DefaultCmd != nil {
			for _, f := range n.DefaultCmd.Flags {
				if f.Name == name {
					return true
				}
			}
		}
	}
	return false
}
