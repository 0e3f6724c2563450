// Package apttest runs the real apt-get and apt-cache against repositories under test, with
// a throwaway configuration in a temporary directory: its own sources, state, cache, logs,
// preferences and (empty) trusted keyrings, so that the host's /etc/apt and /var/lib/apt
// are neither read nor written.
//
// Isolation works on two levels. APT_CONFIG points apt at a configuration file in the
// temporary root, which apt reads before anything else; it moves Dir::Etc (and with it
// apt.conf.d, the parts directory) into the root, so the host's apt.conf.d snippets (hooks
// such as docker-clean's Post-Invoke included) are never read. Every command also gets the
// same settings as -o options.
package apttest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Source is one deb822 source entry.
type Source struct {
	URI        string
	Suites     []string
	Components []string // empty for a flat repository (suite "./" or a path ending in "/")
	SignedBy   string   // path to a keyring; "" marks the source Trusted: yes
	Arch       string   // Architectures: of the entry; "" leaves it out
	Types      string   // Types: of the entry; "" is "deb" ("deb-src" for source packages)
}

// Options configure a throwaway apt.
type Options struct {
	Sources []Source
	// SourcesText, when set, is written as the deb822 sources file instead of Sources:
	// an entry exactly as a person would paste it (a repository page's, say).
	SourcesText string
	Arch        string   // APT::Architecture and APT::Architectures; default "amd64"
	Proxy       string   // Acquire::http::Proxy, e.g. "http://127.0.0.1:PORT"
	ByHash      string   // Acquire::By-Hash value; "" leaves apt's default
	Extra       []string // extra -o options ("Name=value"), applied last so they override
}

// Apt is a throwaway apt configuration rooted at Root.
type Apt struct {
	// Root holds etc/ (apt.conf, sources.list.d, preferences.d, trusted.gpg.d, apt.conf.d),
	// state/ (lists, an empty dpkg status), cache/ (archives, pkgcache) and log/.
	Root string
	opts []string // -o options given to every command
	env  []string
	// trusted is true when some source is Trusted: yes; apt then logs "Ign:" for the
	// InRelease such a repository need not have.
	trusted bool
}

// New writes the sources and configuration into a new temporary directory. It fails the
// test when apt-get is not installed.
func New(t testing.TB, o Options) *Apt {
	t.Helper()
	for _, tool := range []string{"apt-get", "apt-cache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run .ci/install-deps", tool)
		}
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	root := t.TempDir()
	a := &Apt{Root: root}
	dirs := []string{
		"etc/apt.conf.d", "etc/sources.list.d", "etc/preferences.d", "etc/trusted.gpg.d",
		"state/lists/partial", "cache/archives/partial", "log",
	}
	for _, d := range dirs {
		mkdir(t, filepath.Join(root, d))
	}
	writeFile(t, filepath.Join(root, "state/status"), "")
	writeFile(t, filepath.Join(root, "etc/sources.list"), "")

	a.opts = []string{
		"Dir=/",
		"Dir::Etc=" + filepath.Join(root, "etc"),
		"Dir::Etc::Main=apt.conf",
		"Dir::Etc::Parts=apt.conf.d",
		"Dir::Etc::SourceList=sources.list",
		"Dir::Etc::SourceParts=sources.list.d",
		"Dir::Etc::Preferences=preferences",
		"Dir::Etc::PreferencesParts=preferences.d",
		"Dir::Etc::Trusted=trusted.gpg",
		"Dir::Etc::TrustedParts=trusted.gpg.d",
		"Dir::State=" + filepath.Join(root, "state"),
		"Dir::State::Lists=lists",
		"Dir::State::status=" + filepath.Join(root, "state/status"),
		"Dir::State::extended_states=" + filepath.Join(root, "state/extended_states"),
		"Dir::Cache=" + filepath.Join(root, "cache"),
		"Dir::Cache::Archives=archives",
		"Dir::Log=" + filepath.Join(root, "log"),
		"Debug::NoLocking=1",
		"APT::Sandbox::User=root",
		"APT::Architecture=" + o.Arch,
		"APT::Architectures=" + o.Arch,
		"Acquire::Languages=none",
		"quiet=1",
	}
	if o.Proxy != "" {
		a.opts = append(a.opts, "Acquire::http::Proxy="+o.Proxy)
	}
	if o.ByHash != "" {
		a.opts = append(a.opts, "Acquire::By-Hash="+o.ByHash)
	}
	a.opts = append(a.opts, o.Extra...)

	var conf strings.Builder
	for _, opt := range a.opts {
		name, value, _ := strings.Cut(opt, "=")
		fmt.Fprintf(&conf, "%s %q;\n", name, value)
	}
	confPath := filepath.Join(root, "etc/apt.conf")
	writeFile(t, confPath, conf.String())
	a.env = append(os.Environ(), "APT_CONFIG="+confPath, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")

	src, trusted := o.SourcesText, strings.Contains(o.SourcesText, "Trusted: yes")
	if src == "" {
		src, trusted = deb822(o.Sources)
	}
	a.trusted = trusted
	writeFile(t, filepath.Join(root, "etc/sources.list.d/test.sources"), src)
	return a
}

// deb822 writes sources as deb822 entries; trusted reports one marked Trusted: yes.
func deb822(sources []Source) (text string, trusted bool) {
	var src strings.Builder
	for i, s := range sources {
		if i > 0 {
			src.WriteString("\n")
		}
		types := s.Types
		if types == "" {
			types = "deb"
		}
		fmt.Fprintf(&src, "Types: %s\nURIs: %s\nSuites: %s\n", types, s.URI, strings.Join(s.Suites, " "))
		if len(s.Components) > 0 {
			fmt.Fprintf(&src, "Components: %s\n", strings.Join(s.Components, " "))
		}
		if s.Arch != "" {
			fmt.Fprintf(&src, "Architectures: %s\n", s.Arch)
		}
		if s.SignedBy == "" {
			src.WriteString("Trusted: yes\n")
			trusted = true
		} else {
			fmt.Fprintf(&src, "Signed-By: %s\n", s.SignedBy)
		}
	}
	return src.String(), trusted
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("apttest: %v", err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("apttest: %v", err)
	}
}

// command returns bin (apt-get, apt-cache, apt-config) run with the configuration.
func (a *Apt) command(bin string, args ...string) *exec.Cmd {
	full := make([]string, 0, 2*len(a.opts)+len(args))
	for _, o := range a.opts {
		full = append(full, "-o", o)
	}
	cmd := exec.Command(bin, append(full, args...)...)
	cmd.Env = a.env
	return cmd
}

// Cmd returns apt-get with args, run with the configuration.
func (a *Apt) Cmd(args ...string) *exec.Cmd { return a.command("apt-get", args...) }

// CacheCmd returns apt-cache with args, run with the configuration.
func (a *Apt) CacheCmd(args ...string) *exec.Cmd { return a.command("apt-cache", args...) }

// runCmd runs cmd and returns its combined output; a non-zero exit fails the test and
// shows the output.
func runCmd(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// Run runs apt-get with args and returns its output; a non-zero exit fails the test.
func (a *Apt) Run(t testing.TB, args ...string) string {
	t.Helper()
	return runCmd(t, a.Cmd(args...))
}

// Update runs apt-get update and returns its output. It fails the test on a non-zero exit
// and on any "W:", "E:" or "Err:" line, and on any "Ign:" line except (when a source is
// Trusted: yes) one for a missing InRelease or Release.gpg: apt does not print an error
// for an index it skips, so "Ign:" is how a missing or rejected index shows.
func (a *Apt) Update(t testing.TB) string {
	t.Helper()
	out := a.Run(t, "update")
	if bad := updateProblems(out, a.trusted); len(bad) > 0 {
		t.Fatalf("apt-get update reported problems:\n%s\nfull output:\n%s", strings.Join(bad, "\n"), out)
	}
	return out
}

// Problems returns the lines of apt-get update output that show a problem, as Update
// judges them, for a caller that runs apt-get itself (many times, concurrently).
func (a *Apt) Problems(out string) []string { return updateProblems(out, a.trusted) }

// updateProblems returns the lines of apt-get update output that show a problem.
func updateProblems(out string, trusted bool) []string {
	var bad []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "W:"), strings.HasPrefix(line, "E:"), strings.HasPrefix(line, "Err:"):
			bad = append(bad, line)
		case strings.HasPrefix(line, "Ign:"):
			f := strings.Fields(line)
			last := f[len(f)-1]
			if trusted && (last == "InRelease" || last == "Release.gpg") {
				continue
			}
			bad = append(bad, line)
		}
	}
	return bad
}

// Policy returns the candidate version apt-cache policy shows for pkg, or "" when there is
// none (an unknown package, or "(none)").
func (a *Apt) Policy(t testing.TB, pkg string) (candidate string) {
	t.Helper()
	out := runCmd(t, a.CacheCmd("policy", pkg))
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			v = strings.TrimSpace(v)
			if v == "(none)" {
				return ""
			}
			return v
		}
	}
	return ""
}

// Download runs apt-get download for pkgs into a new temporary directory and returns the
// paths of the files it wrote, sorted.
func (a *Apt) Download(t testing.TB, pkgs ...string) []string {
	t.Helper()
	dir := t.TempDir()
	cmd := a.Cmd(append([]string{"download"}, pkgs...)...)
	cmd.Dir = dir
	runCmd(t, cmd)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("apttest: %v", err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, filepath.Join(dir, e.Name()))
	}
	slices.Sort(files)
	return files
}

// SimulateInstall runs apt-get -s install pkgs (dependencies resolved, nothing installed)
// and returns its output.
func (a *Apt) SimulateInstall(t testing.TB, pkgs ...string) string {
	t.Helper()
	return a.Run(t, append([]string{"-s", "install"}, pkgs...)...)
}

// Install unpacks pkgs into root: it downloads exactly the named packages with apt-get
// download and extracts each with dpkg -x. It resolves no dependencies, runs no maintainer
// scripts and records nothing in any dpkg database.
func (a *Apt) Install(t testing.TB, root string, pkgs ...string) {
	t.Helper()
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatalf("dpkg not found: run .ci/install-deps")
	}
	for _, f := range a.Download(t, pkgs...) {
		runCmd(t, exec.Command("dpkg", "-x", f, root))
	}
}

// DpkgInstall installs debs with the real dpkg into root (dpkg --root), with a dpkg
// database of its own there, as a user's apt-get install would: conffiles are
// recorded, and a conffile that would need a question (a file already there with
// other contents) fails, since dpkg's standard input is empty. It returns what dpkg
// printed and its error.
func DpkgInstall(t testing.TB, root string, debs ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatalf("dpkg not found: run .ci/install-deps")
	}
	admin := filepath.Join(root, "var", "lib", "dpkg")
	for _, d := range []string{"info", "updates"} {
		mkdir(t, filepath.Join(admin, d))
	}
	for _, f := range []string{"status", "available"} {
		if _, err := os.Stat(filepath.Join(admin, f)); err != nil {
			writeFile(t, filepath.Join(admin, f), "")
		}
	}
	cmd := exec.Command("dpkg", append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "-i"}, debs...)...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	return string(out), err
}
