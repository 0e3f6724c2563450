package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// good is a complete armor.toml that Parse accepts.
const good = `[repository]
name = "acme"
origin = "Acme"
hostnames = ["APT.Acme.Example", "mirror.acme.example:8080"]
retention = "48h"

[[suite]]
codename = "bookworm"
suite = "stable"
components = ["main", "contrib"]
architectures = ["amd64", "arm64"]
valid_for = "7d"

[suite.inputs]
main = ["debs/main/**/*.deb"]
contrib = ["debs/contrib/*.deb"]

[[suite]]
codename = "trixie"
components = ["main"]
architectures = ["amd64"]
allow_empty = true

[signing]
key = ".armor/keys/signing.sec.asc"
digest = "sha256"

[store]
remote = ".armor/store"

[controld]
url = "https://controld.acme.example"
`

// edit returns good with old replaced by new, failing the test if old is not in it.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(good, old) {
		t.Fatalf("test bug: %q is not in the good config", old)
	}
	return strings.Replace(good, old, new, 1)
}

func TestParseGood(t *testing.T) {
	f, err := Parse([]byte(good), "/srv/acme/armor.toml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", f.Repository.Name, "acme"},
		{"label defaults to origin", f.Repository.Label, "Acme"},
		{"hostname 0 normalised", f.Repository.Hostnames[0], "apt.acme.example"},
		{"hostname 1 loses its port", f.Repository.Hostnames[1], "mirror.acme.example"},
		{"suites", len(f.Suites), 2},
		{"suite field kept", f.Suites[0].Suite, "stable"},
		{"suite defaults to codename", f.Suites[1].Suite, "trixie"},
		{"inputs", f.Suites[0].Inputs["contrib"][0], "debs/contrib/*.deb"},
		{"allow_empty default: inputs must match", f.Suites[0].AllowEmpty, false},
		{"allow_empty", f.Suites[1].AllowEmpty, true},
		{"tree default", f.Output.Tree, DefaultTree},
		{"manifest default", f.Output.Manifest, DefaultManifest},
		{"cache default", f.Output.Cache, DefaultCache},
		{"no passphrase env default: $ARMOR_KEY_PASSPHRASE is always read", f.Signing.PassphraseEnv, ""},
		{"token env default", f.Controld.TokenEnv, DefaultTokenEnv},
		{"digest kept as written", f.Signing.Digest, "sha256"},
		{"path", f.Path, "/srv/acme/armor.toml"},
		{"dir", f.Dir(), "/srv/acme"},
		{"resolve relative", f.Resolve("public"), "/srv/acme/public"},
		{"resolve absolute", f.Resolve("/var/tree"), "/var/tree"},
		{"resolve empty", f.Resolve(""), ""},
		{"remote", f.Remote(), "/srv/acme/.armor/store"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name string
		data string
		// want are substrings the error must contain: what is wrong and where.
		want []string
	}{
		{
			name: "unknown key names the key and its line",
			data: edit(t, `retention = "48h"`, "retention = \"48h\"\nhostname = \"typo.example\""),
			want: []string{"armor.toml", "unknown key", "6| hostname ="},
		},
		{
			name: "unknown key in a suite",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\narchitecture = \"amd64\""),
			want: []string{"unknown key", "13| architecture ="},
		},
		{
			name: "allow_empty is a boolean",
			data: edit(t, `allow_empty = true`, `allow_empty = "yes"`),
			// go-toml v2.4.3 reports the position of a key in the second [[suite]] wrongly
			// (line 22 here, not 33): check only that the file and the type are named.
			want: []string{"armor.toml:", "bool"},
		},
		{
			name: "a suite name is another suite's codename",
			data: edit(t, `suite = "stable"`, `suite = "trixie"`),
			want: []string{"suite 1 (bookworm)", `suite "trixie" is also the name of suite 2 (trixie)`},
		},
		{
			name: "but_automatic_upgrades alone",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\nbut_automatic_upgrades = true"),
			want: []string{"suite 1 (bookworm)", "needs not_automatic"},
		},
		{
			name: "max_removals without sync",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\nmax_removals = \"20%\""),
			want: []string{"suite 1 (bookworm)", "max_removals applies only to a suite with sync = true"},
		},
		{
			name: "max_removals is a percentage",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\nsync = true\nmax_removals = \"0.1\""),
			want: []string{"suite 1 (bookworm)", `max_removals "0.1"`},
		},
		{
			name: "keep_versions is positive",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\nkeep_versions = -1"),
			want: []string{"suite 1 (bookworm)", "keep_versions -1"},
		},
		{
			name: "pool_files names a way",
			data: good + "\n[output]\npool_files = \"symlink\"\n",
			want: []string{`output.pool_files "symlink"`, `"link"`, `"copy"`},
		},
		{
			name: "unknown section",
			data: good + "\n[stores]\nremote = \"x\"\n",
			want: []string{"unknown key", "| [stores]"},
		},
		{
			name: "syntax error names line and column",
			data: edit(t, `name = "acme"`, `name = "acme`),
			want: []string{"armor.toml:2:"},
		},
		{
			name: "wrong type",
			data: edit(t, `hostnames = ["APT.Acme.Example", "mirror.acme.example:8080"]`, `hostnames = "apt.acme.example"`),
			want: []string{"armor.toml:4:"},
		},
		{
			name: "duplicate hostnames name both",
			data: edit(t, `"mirror.acme.example:8080"]`, `"mirror.acme.example:8080", "apt.acme.example."]`),
			want: []string{"repository.hostnames", `"APT.Acme.Example" (entry 1)`, `"apt.acme.example." (entry 3)`, "apt.acme.example"},
		},
		{
			name: "invalid hostname",
			data: edit(t, `"mirror.acme.example:8080"]`, `"bad host"]`),
			want: []string{"repository.hostnames[1]"},
		},
		{
			name: "bad architecture",
			data: edit(t, `architectures = ["amd64", "arm64"]`, `architectures = ["amd64", "ARM64"]`),
			want: []string{"suite 1 (bookworm)", `architecture "ARM64"`},
		},
		{
			name: "architecture all is not a binary architecture",
			data: edit(t, `architectures = ["amd64", "arm64"]`, `architectures = ["all"]`),
			want: []string{"suite 1 (bookworm)", `architecture "all"`},
		},
		{
			name: "no architectures",
			data: edit(t, `architectures = ["amd64", "arm64"]`, `architectures = []`),
			want: []string{"suite 1 (bookworm)", "architectures is empty"},
		},
		{
			name: "inputs name an unlisted component",
			data: edit(t, `contrib = ["debs/contrib/*.deb"]`, `non-free = ["debs/nf/*.deb"]`),
			want: []string{"suite 1 (bookworm)", "inputs.non-free", `"non-free"`, "[main contrib]"},
		},
		{
			name: "component escaping the tree",
			data: edit(t, `components = ["main", "contrib"]`, `components = ["main", "contrib", "../../etc"]`),
			want: []string{"suite 1 (bookworm)", `component "../../etc"`},
		},
		{
			name: "absolute component",
			data: edit(t, `components = ["main", "contrib"]`, `components = ["main", "contrib", "/main"]`),
			want: []string{"suite 1 (bookworm)", `component "/main"`},
		},
		{
			name: "duplicate codename",
			data: edit(t, `codename = "trixie"`, `codename = "bookworm"`),
			want: []string{"suite 2 (bookworm)", "configured twice"},
		},
		{
			name: "bad codename",
			data: edit(t, `codename = "trixie"`, `codename = "../trixie"`),
			want: []string{"suite 2", `codename "../trixie"`},
		},
		{
			name: "no suites",
			data: good[:strings.Index(good, "[[suite]]")] + good[strings.Index(good, "[signing]"):],
			want: []string{"no [[suite]]"},
		},
		{
			name: "bad repository name",
			data: edit(t, `name = "acme"`, `name = "Acme Corp"`),
			want: []string{"repository.name", `"Acme Corp"`},
		},
		{
			name: "multi-line origin",
			data: edit(t, `origin = "Acme"`, `origin = "Acme\nDate: forged"`),
			want: []string{"repository.origin", "single line"},
		},
		{
			name: "suite description over two lines",
			data: edit(t, `valid_for = "7d"`, "valid_for = \"7d\"\ndescription = \"a\\n\\nb\""),
			want: []string{"suite 1 (bookworm)", "description", "single line"},
		},
		{
			name: "bad valid_for",
			data: edit(t, `valid_for = "7d"`, `valid_for = "a week"`),
			want: []string{"suite 1 (bookworm)", "valid_for", `"a week"`},
		},
		{
			name: "bad retention",
			data: edit(t, `retention = "48h"`, `retention = "-1h"`),
			want: []string{"repository.retention", `"-1h"`},
		},
		{
			name: "both passphrase settings",
			data: edit(t, `digest = "sha256"`, "digest = \"sha256\"\npassphrase_env = \"P\"\npassphrase_file = \"p.txt\""),
			want: []string{"signing", "passphrase_env", "passphrase_file", "not both"},
		},
		{
			name: "bad digest",
			data: edit(t, `digest = "sha256"`, `digest = "MD5"`),
			want: []string{"signing.digest", `"MD5"`},
		},
		{
			name: "tree is the root directory",
			data: good + "\n[output]\ntree = \"/\"\n",
			want: []string{`output.tree "/" resolves to /, the root directory`, `such as "public"`},
		},
		{
			name: "tree is the root directory, relatively",
			data: good + "\n[output]\ntree = \"../../..\"\n",
			want: []string{`output.tree "../../.." resolves to /, the root directory`},
		},
		{
			name: "tree is the project directory",
			data: good + "\n[output]\ntree = \".\"\n",
			want: []string{`output.tree "." resolves to /srv/acme, the project directory`},
		},
		{
			name: "tree is the project directory, absolutely",
			data: good + "\n[output]\ntree = \"/srv/acme/\"\n",
			want: []string{`output.tree "/srv/acme/" resolves to /srv/acme, the project directory`},
		},
		{
			name: "tree is a parent of the project",
			data: good + "\n[output]\ntree = \"..\"\n",
			want: []string{`output.tree ".." resolves to /srv, a parent of the project directory /srv/acme`},
		},
		{
			name: "tree is an absolute parent of the project",
			data: good + "\n[output]\ntree = \"/srv\"\n",
			want: []string{`output.tree "/srv" resolves to /srv, a parent of the project directory /srv/acme`},
		},
		{
			name: "both store kinds",
			data: edit(t, `remote = ".armor/store"`, "remote = \".armor/store\"\n[store.s3]\nbucket = \"b\""),
			want: []string{"store: set either remote or [store.s3]"},
		},
		{
			name: "s3 without bucket",
			data: edit(t, `remote = ".armor/store"`, "[store.s3]\nregion = \"eu-west-1\""),
			want: []string{"store.s3.bucket is empty"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(c.data), "/srv/acme/armor.toml")
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", f)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.Contains(err.Error(), "/srv/acme/armor.toml") {
				t.Errorf("error does not name the file:\n%v", err)
			}
		})
	}
}

// TestTreeAccepted: trees beside, below or away from the project are fine, including
// a sibling whose name starts with the project's.
func TestTreeAccepted(t *testing.T) {
	for tree, want := range map[string]string{
		"public":           "/srv/acme/public",
		"out/tree":         "/srv/acme/out/tree",
		"../acme-public":   "/srv/acme-public",
		"/var/www/apt":     "/var/www/apt",
		"/srv/acme/x/../y": "/srv/acme/y",
	} {
		t.Run(tree, func(t *testing.T) {
			f, err := Parse([]byte(good+"\n[output]\ntree = "+strconv.Quote(tree)+"\n"), "/srv/acme/armor.toml")
			if err != nil {
				t.Fatal(err)
			}
			if got := filepath.Clean(f.Resolve(f.Output.Tree)); got != want {
				t.Errorf("tree resolves to %s, want %s", got, want)
			}
		})
	}
}

// TestTreeThroughSymlink: a tree that is a symbolic link to the project directory is
// refused too.
func TestTreeThroughSymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(dir, "public")); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse([]byte(good), filepath.Join(dir, "armor.toml"))
	want := `output.tree "public" resolves to ` + filepath.Join(dir, "public") + " (" + real + " through symbolic links), the project directory"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse: %v, want an error containing %q", err, want)
	}
}

func TestRemote(t *testing.T) {
	const head = "[repository]\nname = \"r\"\n[[suite]]\ncodename = \"s\"\ncomponents = [\"main\"]\narchitectures = [\"amd64\"]\n[signing]\nkey = \"k.asc\"\n"
	cases := []struct {
		name  string
		store string
		want  string
	}{
		{"no store", "", ""},
		{"relative directory", "[store]\nremote = \"store\"", "/srv/proj/store"},
		{"dot directory", "[store]\nremote = \"./out/store\"", "/srv/proj/out/store"},
		{"parent directory", "[store]\nremote = \"../shared/store\"", "/srv/shared/store"},
		{"relative directory with a colon", "[store]\nremote = \"./a:b\"", "/srv/proj/a:b"},
		{"absolute directory", "[store]\nremote = \"/var/lib/armor\"", "/var/lib/armor"},
		{"named remote", "[store]\nremote = \"r2:bucket/prefix\"", "r2:bucket/prefix"},
		{"connection string", "[store]\nremote = \":s3,provider=AWS:bucket\"", ":s3,provider=AWS:bucket"},
		{"s3 with everything", "[store.s3]\nprovider = \"Cloudflare\"\nendpoint = \"https://acct.r2.cloudflarestorage.com\"\nregion = \"auto\"\nbucket = \"apt\"\nprefix = \"/acme/\"",
			":s3,provider=Cloudflare,endpoint='https://acct.r2.cloudflarestorage.com',region=auto,env_auth=true:apt/acme"},
		{"s3 bucket only", "[store.s3]\nbucket = \"apt\"", ":s3,env_auth=true:apt"},
		{"s3 quote in a value", "[store.s3]\nbucket = \"apt\"\nregion = \"it's\"", ":s3,region='it''s',env_auth=true:apt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(head+c.store+"\n"), "/srv/proj/armor.toml")
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Remote(); got != c.want {
				t.Errorf("Remote() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "armor.toml")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Remote(), filepath.Join(dir, ".armor", "store"); got != want {
		t.Errorf("Remote() = %q, want %q", got, want)
	}
	_, err = Load(filepath.Join(dir, "missing.toml"))
	if err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("Load of a missing file: %v, want an error naming it", err)
	}
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0d", 0, false},
		{"-2d", 0, false},
		{"0s", 0, false},
		{"d", 0, false},
		{"1w", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := PositiveDuration(c.in)
			if (err == nil) != c.ok || got != c.want {
				t.Errorf("PositiveDuration(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

func TestToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("  tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MY_TOKEN", "tok-env")
	base := strings.Replace(good, `url = "https://controld.acme.example"`, "url = \"https://controld.acme.example\"\ntoken_env = \"MY_TOKEN\"", 1)
	f, err := Parse([]byte(base), filepath.Join(dir, "armor.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := f.Token(); err != nil || tok != "tok-env" {
		t.Errorf("Token() from env = %q, %v", tok, err)
	}
	// The file wins over the environment, and is relative to armor.toml.
	f.Controld.TokenFile = "token"
	if tok, err := f.Token(); err != nil || tok != "tok-123" {
		t.Errorf("Token() from file = %q, %v", tok, err)
	}
	f.Controld.TokenFile = "nope"
	if _, err := f.Token(); err == nil || !strings.Contains(err.Error(), "controld.token_file") {
		t.Errorf("Token() from a missing file: %v", err)
	}
}

// FuzzParse feeds arbitrary files to Parse. It must not panic, and whatever it accepts
// must satisfy what the rest of armor relies on.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(""))
	f.Add([]byte("[repository]\nname = \"x\"\n[[suite]]\ncodename = \"s\"\ncomponents = [\"main\"]\narchitectures = [\"amd64\"]\n[signing]\nkey = \"k\"\n[store.s3]\nbucket = \"b\"\nendpoint = \"http://h:1\"\n"))
	f.Add([]byte("[repository]\nname = \"x\"\nhostnames = [\"A.example\", \"a.example:80\"]\n"))
	f.Add([]byte("[[suite]]\n[suite.inputs]\nmain = 3\n"))
	f.Add([]byte("[output]\ntree = \"../../x\"\n[store]\nremote = \":s3:\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "/fuzz/armor.toml")
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned a config with an error: %v", err)
			}
			return
		}
		if cfg.Path != "/fuzz/armor.toml" || len(cfg.Suites) == 0 {
			t.Fatalf("accepted an incomplete config: %+v", cfg)
		}
		seen := map[string]bool{}
		for _, h := range cfg.Repository.Hostnames {
			if seen[h] {
				t.Fatalf("accepted duplicate hostname %q", h)
			}
			seen[h] = true
		}
		for _, s := range cfg.Suites {
			if s.Suite == "" {
				t.Fatalf("suite %q has no Suite after defaults", s.Codename)
			}
			for comp := range s.Inputs {
				found := false
				for _, c := range s.Components {
					found = found || c == comp
				}
				if !found {
					t.Fatalf("accepted inputs for unlisted component %q", comp)
				}
			}
		}
		if cfg.Signing.PassphraseEnv != "" && cfg.Signing.PassphraseFile != "" {
			t.Fatalf("accepted both passphrase_env and passphrase_file: %+v", cfg.Signing)
		}
		_ = cfg.Remote()
		_ = cfg.Resolve(cfg.Output.Tree)
	})
}
