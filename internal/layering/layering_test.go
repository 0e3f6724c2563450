package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/armor-apt/armor"

// A rule says which armor packages the packages under from may not depend on, directly or
// through others (their non-test dependencies), with the reason shown when it is broken.
type rule struct {
	from   []string // package paths relative to the module; "x/..." is x and below
	deny   []string // the same form
	except []string // packages under from that the rule does not cover
	allow  []string // packages under deny that remain allowed
	why    string
}

var rules = []rule{
	{
		from: []string{"gen/...", "manifest/...", "store/...", "publish/..."},
		deny: []string{"cli/...", "controld", "controld/state/...", "edged/..."},
		why:  "libraries never import a face: cli, controld's daemon and edged use them, not the other way round",
	},
	{
		from: []string{"gen/...", "manifest/..."},
		deny: []string{"store/...", "publish/...", "controld/..."},
		why:  "building a tree and the manifest know nothing of stores, pushing or controld",
	},
	{
		from:  []string{"store/..."},
		deny:  []string{"..."},
		allow: []string{"store/..."},
		why:   "the store seam imports no other armor package",
	},
	{
		from:  []string{"gen/xz"},
		deny:  []string{"..."},
		allow: []string{"gen/xz"},
		why:   "the xz codec stands alone beside its user, gen/index: it knows nothing of indexes or Debian",
	},
	{
		from: []string{"gate/..."},
		deny: []string{"gen/...", "publish/...", "store/...", "controld/...", "edged/...", "cli/..."},
		why:  "the release gate judges packages; the build calls it through a hook, and it neither builds, pushes nor serves",
	},
	{
		from: []string{"gen/...", "manifest/...", "debian/..."},
		deny: []string{"gate/..."},
		why:  "the build takes the gate as a hook (gen.Options.Gate), so that it stays a library of its own",
	},
	{
		from: []string{"debian/..."},
		deny: []string{"gen/...", "publish/...", "store/...", "controld/...", "edged/...", "cli/..."},
		why:  "the Debian and OpenPGP formats are neutral ground: they neither build, push nor serve",
	},
	{
		from:  []string{"controld/...", "edged/...", "gen/...", "publish/...", "manifest/...", "store/..."},
		deny:  []string{"debian/sign/..."},
		allow: []string{"debian/sign"},
		why:   "keys stay home: only the armor command opens a signer held in an HSM, a KMS or gpg-agent (debian/sign's backends); the others sign with a *sign.Key they are handed, or verify",
	},
	{
		from: []string{"controld/...", "edged/..."},
		deny: []string{"gen/...", "publish/..."},
		why:  "the daemons verify and serve; they read Debian formats through debian/, never through the builder or the push workflows",
	},
	{
		from:  []string{"edged/..."},
		deny:  []string{"controld/..."},
		allow: []string{"controld/api"},
		why:   "edged talks to controld over HTTP: it imports only controld's wire types",
	},
	{
		from: []string{"controld/..."},
		deny: []string{"edged/..."},
		why:  "controld and edged are separate daemons that meet only in controld's HTTP API",
	},
	{
		from: []string{"controld/api"},
		deny: []string{"controld", "controld/state/...", "controld/client", "cli/...", "edged/...", "gen/...", "store/...", "publish/..."},
		why:  "the wire types are a leaf that controld, its client and edged all share",
	},
	{
		from: []string{"cdn/..."},
		deny: []string{"controld", "controld/state/...", "controld/hooks", "controld/client", "edged/...", "gen/...", "publish/...", "store/..."},
		why:  "the CDN purger meets controld in its webhooks and the edges in /readyz: of them it imports only controld's wire types",
	},
	{
		from:   []string{"..."},
		except: []string{"cli/armor", "cli/..."},
		deny:   []string{"cli/..."},
		why:    "nothing but the armor command imports cli",
	},
	{
		from:   []string{"..."},
		except: []string{"internal/testkit/...", "cmd/..."},
		deny:   []string{"internal/testkit/..."},
		why:    "test kits are for tests and cmd/ only, never linked into armor",
	},
}

// match reports whether the module-relative path p is named by pattern.
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// violations returns every broken rule for pkgs, each package's dependencies given as
// module-relative paths.
func violations(pkgs map[string][]string) []string {
	var out []string
	for _, r := range rules {
		for p, deps := range pkgs {
			if !matchAny(r.from, p) || matchAny(r.except, p) {
				continue
			}
			for _, d := range deps {
				if d != p && matchAny(r.deny, d) && !matchAny(r.allow, d) {
					out = append(out, fmt.Sprintf("%s depends on %s: %s", p, d, r.why))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// armorDeps lists every package of the module with its armor dependencies (transitive,
// tests excluded), as go list reports them.
func armorDeps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		rel := relative(p.ImportPath)
		for _, d := range p.Deps {
			if r := relative(d); r != "" {
				pkgs[rel] = append(pkgs[rel], r)
			}
		}
		if _, ok := pkgs[rel]; !ok {
			pkgs[rel] = nil
		}
	}
	return pkgs
}

func relative(importPath string) string {
	if importPath == module {
		return "."
	}
	rel, ok := strings.CutPrefix(importPath, module+"/")
	if !ok {
		return ""
	}
	return rel
}

// TestImportRules checks the module's real import graph against the rules.
func TestImportRules(t *testing.T) {
	pkgs := armorDeps(t)
	for _, want := range []string{"gen", "debian/deb", "debian/release", "debian/sign", "manifest", "store", "cli", "controld", "controld/api", "edged"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list did not report package %s: the rules would check nothing", want)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestRulesCatch: each kind of breach the rules exist for is reported, and what they
// allow is not.
func TestRulesCatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pkg   string
		deps  []string
		wants int
	}{
		{"library imports the CLI", "gen", []string{"cli/config"}, 2},
		{"library imports the daemon", "publish", []string{"controld"}, 1},
		{"publish may use controld's client", "publish", []string{"controld/client", "controld/api", "store"}, 0},
		{"store imports the manifest", "store", []string{"manifest"}, 1},
		{"store's suite imports the store", "store/storetest", []string{"store"}, 0},
		{"edged imports controld's state", "edged", []string{"controld/state"}, 1},
		{"edged imports controld's client", "edged", []string{"controld/client"}, 1},
		{"edged imports the wire types", "edged", []string{"controld/api", "manifest", "store"}, 0},
		{"controld imports edged", "controld", []string{"edged"}, 1},
		{"controld's state imports edged's internals", "controld/state/bolt", []string{"edged/internal/connpoll"}, 1},
		{"controld imports the builder", "controld", []string{"gen", "gen/index"}, 2},
		{"controld imports publish", "controld", []string{"publish"}, 1},
		{"edged imports the builder", "edged", []string{"gen"}, 1},
		{"the codec imports index assembly", "gen/xz", []string{"gen/index", "debian/release"}, 2},
		{"controld verifies with the formats", "controld", []string{"debian/sign", "debian/release", "manifest", "store"}, 0},
		{"edged reads the formats", "edged", []string{"debian/release", "controld/api"}, 0},
		{"the formats import the builder", "debian/deb", []string{"gen/index"}, 1},
		{"the formats import the store", "debian/sign", []string{"store"}, 1},
		{"the formats use the manifest's path rules", "debian/release", []string{"manifest"}, 0},
		{"the builder uses the formats", "gen", []string{"debian/deb", "debian/release", "debian/sign", "debian/pool"}, 0},
		{"a daemon links a test kit", "controld", []string{"internal/testkit/s3test"}, 1},
		{"cmd links a test kit", "cmd/s3server", []string{"internal/testkit/s3test"}, 0},
		{"the manifest imports the store", "manifest", []string{"store"}, 1},
		{"the armor command imports cli", "cli/armor", []string{"cli"}, 0},
		{"edged imports cli", "edged", []string{"cli/config"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(map[string][]string{tc.pkg: tc.deps})
			if len(got) != tc.wants {
				t.Errorf("%s with deps %v: %d violations %q, want %d", tc.pkg, tc.deps, len(got), got, tc.wants)
			}
		})
	}
}
