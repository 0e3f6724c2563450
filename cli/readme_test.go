package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// docFiles are the files whose printed armor command lines TestDocCommands parses; every
// file under configs/ is added to them.
var docFiles = []string{"../README.md", "../controld/API.md"}

// TestDocCommands parses every armor command line printed in the README, in
// controld/API.md and in the files under configs/ (comments included) with armor's real
// kong parser, so a renamed or removed flag, a missing subcommand or a missing required
// argument in the documentation fails here. The commands themselves run in the
// end-to-end test and the demo.
//
// A command line is a line of a ```sh block, or a comment line of a config file or unit,
// that starts with armor (after VAR=value prefixes); it must parse whole. A `code span`
// in prose or in a comment that starts with "armor " names a command: its command and
// flags must exist, though it may leave out required values, and a|b stands for each of
// a and b. Comments of scripts (configs/demo) describe steps, so they are spans too.
func TestDocCommands(t *testing.T) {
	files := append([]string(nil), docFiles...)
	err := filepath.WalkDir("../configs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, file := range files {
		cmds := docCommands(t, file)
		total += len(cmds)
		for _, c := range cmds {
			if err := checkArgs(t, c.args, c.whole); err != nil {
				t.Errorf("%s: %q: %v", c.where, strings.Join(c.args, " "), err)
			}
		}
	}
	if total < 40 {
		t.Fatalf("found only %d armor command lines in %d files; the extractor is broken", total, len(files))
	}
}

// TestCheckArgsRefuses keeps the checker honest: each of these must be refused.
func TestCheckArgsRefuses(t *testing.T) {
	for _, bad := range [][]string{
		{"push", "--bogus"}, {"frobnicate"}, {"repos"}, {"key", "generate", "--algo", "x", "--nope"},
		{"controld", "token", "create", "--data", "/var/lib/armor/controld", "--name", "root"},
		{"tokens", "create", "edge", "--for", "*"}, // --action is required
		{"edged", "--config", "/etc/armor/edged.toml"},
	} {
		if checkArgs(t, bad, true) == nil {
			t.Errorf("checkArgs accepted %q", bad)
		}
	}
	if err := checkArgs(t, []string{"tokens", "create", "edge"}, false); err != nil {
		t.Errorf("a reference may leave out required flags, got %v", err)
	}
	if err := checkArgs(t, []string{"edged", "--config-file", "/nonexistent/edged.toml"}, true); err != nil {
		t.Errorf("files named in documented commands need not exist here, got %v", err)
	}
}

// docCommand is one armor command found in a documentation file: its arguments after
// "armor", and whether it is a whole command line or a reference to a command.
type docCommand struct {
	where string
	args  []string
	whole bool
}

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	shellOps  = regexp.MustCompile(`&&|\|\||;|\s\|\s`)
	envPrefix = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// docCommands extracts the armor commands of file.
func docCommands(t *testing.T, file string) []docCommand {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	markdown, script := strings.HasSuffix(file, ".md"), strings.HasSuffix(file, ".sh")
	var out []docCommand
	add := func(n int, line string, whole bool) {
		for _, args := range shellCommands(line) {
			if !whole {
				for _, alt := range alternatives(args) {
					out = append(out, docCommand{where: file + ":" + strconv.Itoa(n), args: alt})
				}
				continue
			}
			out = append(out, docCommand{where: file + ":" + strconv.Itoa(n), args: args, whole: true})
		}
	}
	spans := func(n int, text string) {
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			if strings.HasPrefix(m[1], "armor ") || m[1] == "armor" {
				add(n, m[1], false)
			}
		}
	}
	// A code span of prose may run over a line break, so prose is read by paragraph.
	var para []string
	paraStart := 0
	flush := func() {
		spans(paraStart, strings.Join(para, " "))
		para = para[:0]
	}
	sc := bufio.NewScanner(f)
	inFence, inShell, n := false, false, 0
	cont, contStart := "", 0 // a shell line continued with a backslash, and where it began
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case markdown && strings.HasPrefix(line, "```"):
			flush()
			inFence = !inFence
			inShell = inFence && line == "```sh"
		case markdown && inShell && strings.HasSuffix(line, "\\"):
			// A continuation: sh joins it with the next line.
			if cont == "" {
				contStart = n
			}
			cont += strings.TrimSuffix(line, "\\") + " "
		case markdown && inShell:
			if cont != "" {
				line, cont = cont+line, ""
				add(contStart, line, true)
				continue
			}
			add(n, line, true)
		case markdown && !inFence && line == "":
			flush()
		case markdown && !inFence:
			if len(para) == 0 {
				paraStart = n
			}
			para = append(para, line)
		case strings.HasPrefix(line, "#"):
			comment := strings.TrimSpace(strings.TrimLeft(line, "#"))
			if script {
				add(n, strings.ReplaceAll(comment, "→", ";"), false)
				continue
			}
			add(n, comment, true)
			spans(n, comment)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return out
}

// shellCommands splits a shell line into its simple commands and returns the arguments
// of those that run armor (named as armor or by a path ending in /armor), without
// VAR=value prefixes, redirections, a trailing shell comment or a trailing "…".
func shellCommands(line string) [][]string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	var out [][]string
	for _, part := range shellOps.Split(line, -1) {
		words := shellWords(part)
		for len(words) > 0 && envPrefix.MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 || (words[0] != "armor" && !strings.HasSuffix(words[0], "/armor")) {
			continue
		}
		args := []string{}
		for _, w := range words[1:] {
			if strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") || w == "<" {
				break
			}
			args = append(args, w)
		}
		if k := len(args); k > 0 && (args[k-1] == "…" || args[k-1] == "...") {
			args = args[:k-1]
		}
		out = append(out, args)
	}
	return out
}

// shellWords splits s into words as a shell does, for the quoting documentation uses:
// single and double quotes, no escapes or expansions.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// alternatives expands the first a|b word of a reference into one command per choice.
func alternatives(args []string) [][]string {
	for i, a := range args {
		if strings.Contains(a, "|") && !strings.HasPrefix(a, "-") {
			var out [][]string
			for _, choice := range strings.Split(a, "|") {
				alt := append(append(append([]string(nil), args[:i]...), choice), args[i+1:]...)
				out = append(out, alternatives(alt)...)
			}
			return out
		}
	}
	return [][]string{args}
}

// checkArgs parses args with armor's parser: whole, as a command line must parse; else
// as a reference, whose command and flags must exist. Files a command names need not
// exist on this machine (existingfile is checked as a plain path).
func checkArgs(t *testing.T, args []string, whole bool) error {
	t.Helper()
	var c CLI
	p, err := newParser(&c,
		kong.Writers(io.Discard, io.Discard),
		kong.Exit(func(int) {}),
		kong.NamedMapper("existingfile", anyPath{}),
		kong.NamedMapper("existingdir", anyPath{}),
	)
	if err != nil {
		t.Fatal(err)
	}
	var ctx *kong.Context
	if whole {
		ctx, err = p.Parse(args)
	} else {
		ctx, err = kong.Trace(p, args)
		if err == nil {
			err = ctx.Error
		}
	}
	if err != nil {
		return err
	}
	return daemonConfig(ctx)
}

// daemonConfig refuses --config (armor.toml's path, a flag of every command) given to
// controld or edged: they do not read armor.toml, so it would be ignored in silence
// where --config-file was meant.
func daemonConfig(ctx *kong.Context) error {
	cmd := ctx.Command()
	if !strings.HasPrefix(cmd, "controld") && !strings.HasPrefix(cmd, "edged") {
		return nil
	}
	for _, p := range ctx.Path {
		if p.Flag != nil && p.Flag.Name == "config" {
			return fmt.Errorf("--config names armor.toml, which %s does not read: use --config-file", strings.Fields(cmd)[0])
		}
	}
	return nil
}

// anyPath decodes a file or directory flag as its path, without looking for it.
type anyPath struct{}

func (anyPath) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	var s string
	if err := ctx.Scan.PopValueInto("path", &s); err != nil {
		return err
	}
	if target.Kind() == reflect.Slice {
		target.Set(reflect.Append(target, reflect.ValueOf(s)))
		return nil
	}
	target.SetString(s)
	return nil
}
