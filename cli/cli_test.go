package cli

// In-process tests of the armor commands as a user runs them: Main with arguments,
// checking exit codes and what is printed. push has its own file (push_test.go).

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

// Fixed test keys (testdata/keys/README.md).
const (
	eddsaKey          = "../testdata/keys/eddsa.sec.asc"
	eddsaKeyring      = "../testdata/keys/eddsa.pub.gpg"
	protectedKey      = "../testdata/keys/protected.sec.asc"
	protectedPass     = "armor-test-passphrase"
	testHost          = "apt.armor.test"
	testCodename      = "stable"
	testDate          = "1767225600" // 2026-01-01T00:00:00Z
	testConfigName    = "armor.toml"
	testManifestName  = "manifest.toml"
	testTreeName      = "public"
	testPackagesCount = 20
)

// result is what one armor invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// armor runs Main with args, as the armor binary would.
func armor(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// armorOK runs armor and fails the test unless it exits 0; it returns standard output.
func armorOK(t *testing.T, args ...string) string {
	t.Helper()
	r := armor(t, args...)
	if r.code != 0 {
		t.Fatalf("armor %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// armorFails runs armor and fails the test unless it exits with code; the error message
// (standard error) must contain every one of want.
func armorFails(t *testing.T, code int, want []string, args ...string) result {
	t.Helper()
	r := armor(t, args...)
	if r.code != code {
		t.Fatalf("armor %s: want exit %d, got %s", strings.Join(args, " "), code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("armor %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, r.stderr)
		}
	}
	return r
}

func abs(t testing.TB, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// projectOptions shape the armor.toml of a test project.
type projectOptions struct {
	key    string   // secret key file; default the fixed EdDSA key
	noKey  bool     // leave signing.key out: the environment gives the key
	store  string   // store remote; default none
	archs  []string // default amd64, arm64
	extra  string   // appended to the file
	noDebs bool     // do not write the synthetic packages
}

// newProject writes armor.toml and testPackagesCount synthetic packages into dir (made
// when missing) and returns the path of armor.toml.
func newProject(t testing.TB, dir string, o projectOptions) string {
	t.Helper()
	if o.key == "" {
		o.key = abs(t, eddsaKey)
	}
	if len(o.archs) == 0 {
		o.archs = []string{"amd64", "arm64"}
	}
	quoted := make([]string, len(o.archs))
	for i, a := range o.archs {
		quoted[i] = strconv.Quote(a)
	}
	toml := `[repository]
name = "test"
origin = "Armor Test"
hostnames = [` + strconv.Quote(testHost) + `]

[[suite]]
codename = ` + strconv.Quote(testCodename) + `
components = ["main"]
architectures = [` + strings.Join(quoted, ", ") + `]

[suite.inputs]
main = ["debs/*.deb"]

[signing]
`
	if !o.noKey {
		toml += "key = " + strconv.Quote(o.key) + "\n"
	}
	if o.store != "" {
		toml += "\n[store]\nremote = " + strconv.Quote(o.store) + "\n"
	}
	toml += o.extra
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, testConfigName)
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatalf("test project's armor.toml: %v", err)
	}
	if !o.noDebs {
		if _, err := synth.Write(filepath.Join(dir, "debs"), synth.Options{N: testPackagesCount, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func loadManifest(t *testing.T, path string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gunzipT returns gz decompressed.
func gunzipT(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readFileT(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps", name)
	}
	return p
}

// runTool runs a tool and returns its standard output, failing the test on an error.
func runTool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(needTool(t, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// isolate clears the environment variables that would change what the commands do.
func isolate(t *testing.T) {
	t.Helper()
	for _, v := range []string{"ARMOR_SIGNING_KEY", "ARMOR_SIGNING_KEY_FILE", "ARMOR_KEY_PASSPHRASE", "ARMOR_KEY_PASSPHRASE_FILE", "ARMOR_CONFIG", "ARMOR_TOKEN", "SOURCE_DATE_EPOCH"} {
		t.Setenv(v, "")
		os.Unsetenv(v) // t.Setenv restores it afterwards
	}
}

func TestInit(t *testing.T) {
	isolate(t)
	dir := filepath.Join(t.TempDir(), "proj")
	args := []string{"init", "--dir", dir, "--name", "x", "--hostname", "a.test", "--key-algo", "eddsa"}
	out := armorOK(t, args...)
	cfgPath := filepath.Join(dir, "armor.toml")
	if !strings.Contains(out, cfgPath) {
		t.Errorf("init output does not name %s:\n%s", cfgPath, out)
	}

	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("config.Load of what init wrote: %v", err)
	}
	if cfg.Repository.Name != "x" || len(cfg.Repository.Hostnames) != 1 || cfg.Repository.Hostnames[0] != "a.test" {
		t.Errorf("armor.toml repository = %+v", cfg.Repository)
	}
	if got, want := cfg.Remote(), filepath.Join(dir, ".armor", "store"); got != want {
		t.Errorf("store remote = %q, want %q", got, want)
	}

	secret := cfg.Resolve(cfg.Signing.Key)
	if !strings.HasPrefix(secret, filepath.Join(dir, ".armor", "keys")+string(filepath.Separator)) {
		t.Errorf("secret key %s is not under .armor/keys", secret)
	}
	fi, err := os.Stat(secret)
	if err != nil {
		t.Fatalf("secret key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secret key mode = %v, want 0600", fi.Mode().Perm())
	}
	if ig, err := os.ReadFile(filepath.Join(dir, ".gitignore")); err != nil || !strings.Contains(string(ig), "\n/public/\n/debs/\n") {
		t.Errorf("init's .gitignore does not ignore the tree and the inputs: %v\n%s", err, ig)
	}
	for _, p := range []string{"keys/x-archive-keyring.asc", "keys/x-archive-keyring.gpg"} {
		if data, err := os.ReadFile(filepath.Join(dir, p)); err != nil || len(data) == 0 {
			t.Errorf("%s: %v (%d bytes)", p, err, len(data))
		}
	}
	// The public keyring is one gpg accepts, and holds the secret key's public half.
	gnupg := gnupgHome(t)
	cols := runTool(t, dir, []string{"GNUPGHOME=" + gnupg}, "gpg", "--batch", "--with-colons", "--show-keys", "keys/x-archive-keyring.gpg")
	list := armorOK(t, "--json", "key", "list", "--dir", filepath.Dir(secret))
	var keys []struct{ Fingerprint, Error string }
	if err := json.Unmarshal([]byte(list), &keys); err != nil || len(keys) != 1 || keys[0].Fingerprint == "" {
		t.Fatalf("key list --json after init: %v\n%s", err, list)
	}
	if !strings.Contains(cols, "fpr:::::::::"+keys[0].Fingerprint+":") {
		t.Errorf("gpg --show-keys of the keyring lacks fingerprint %s:\n%s", keys[0].Fingerprint, cols)
	}

	// git ignores everything in .armor, so `git add .` cannot pick up the secret key.
	runTool(t, dir, nil, "git", "init", "-q")
	runTool(t, dir, nil, "git", "check-ignore", "-q", secret)
	added := runTool(t, dir, nil, "git", "add", "--dry-run", ".")
	if strings.Contains(added, ".armor") {
		t.Errorf("git add . would add files of .armor:\n%s", added)
	}
	if !strings.Contains(added, "armor.toml") || !strings.Contains(added, "keys/x-archive-keyring.gpg") {
		t.Errorf("git add . would not add armor.toml and the public keyring:\n%s", added)
	}

	// A second init refuses to overwrite, naming the file; --force does.
	before := readFileT(t, secret)
	armorFails(t, 1, []string{cfgPath, "--force"}, args...)
	if !bytes.Equal(before, readFileT(t, secret)) {
		t.Error("the refused init changed the secret key")
	}
	armorOK(t, append(args, "--force")...)
	if bytes.Equal(before, readFileT(t, secret)) {
		t.Error("init --force did not replace the secret key")
	}

	// Before any .deb is in debs/, the build fails, saying where it looked and what to do,
	// and writes no tree; the suite option init writes commented out lets it build empty.
	armorFails(t, 1, []string{"suite stable component main", `input pattern "debs/**/*.deb"`,
		"relative to " + dir, "matches no file", "allow_empty = true"}, "-c", cfgPath, "build")
	if _, err := os.Stat(filepath.Join(dir, "public")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a build with no inputs wrote the tree (stat: %v)", err)
	}
	template := readFileT(t, cfgPath)
	allowed := bytes.Replace(template, []byte("# allow_empty = true"), []byte("allow_empty = true"), 1)
	if bytes.Equal(allowed, template) {
		t.Fatalf("the armor.toml init writes does not offer allow_empty:\n%s", template)
	}
	if err := os.WriteFile(cfgPath, allowed, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := armorOK(t, "-c", cfgPath, "build"); !strings.Contains(out, "packages: 0") {
		t.Errorf("build of an empty suite with allow_empty: %s", out)
	}
	if err := os.WriteFile(cfgPath, template, 0o644); err != nil {
		t.Fatal(err)
	}

	// The project builds as init left it.
	if _, err := synth.WriteOne(filepath.Join(dir, "debs"), "hello", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	out = armorOK(t, "-c", cfgPath, "build")
	if !strings.Contains(out, "built release") {
		t.Errorf("build after init: %s", out)
	}
	armorOK(t, "verify", filepath.Join(dir, "public"), "--keyring", filepath.Join(dir, "keys", "x-archive-keyring.gpg"), "--pool")
	// ... and pushes --store-only to the local store init configured.
	out = armorOK(t, "-c", cfgPath, "push", "--store-only")
	if !strings.Contains(out, "uploaded") || !strings.Contains(out, "not recorded in controld") {
		t.Errorf("push after init: %s", out)
	}
	if objs, _ := filepath.Glob(filepath.Join(dir, ".armor", "store", "objects", "sha256", "*", "*")); len(objs) == 0 {
		t.Error("push after init stored nothing in .armor/store")
	}
}

// gnupgHome is a throwaway GNUPGHOME; its agent is stopped when the test ends.
func gnupgHome(t *testing.T) string {
	t.Helper()
	// A short path: the agent's socket path must fit in a sockaddr_un.
	dir, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd := exec.Command("gpgconf", "--kill", "gpg-agent")
		cmd.Env = append(os.Environ(), "GNUPGHOME="+dir)
		_ = cmd.Run()
		os.RemoveAll(dir)
	})
	return dir
}

func TestKeyCommands(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	t.Setenv("ARMOR_KEY_PASSPHRASE", "pass one")

	// generate: a passphrase-protected key, mode 0600, public files beside it.
	secret := filepath.Join(dir, "keys", "ci.sec.asc")
	out := armorOK(t, "key", "generate", "--algo", "eddsa", "--name", "CI key", "--email", "ci@armor.invalid", "--out", secret)
	if !strings.Contains(out, "CI key <ci@armor.invalid>") || !strings.Contains(out, secret) {
		t.Errorf("key generate output:\n%s", out)
	}
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated key: %v, mode %v", err, fi.Mode().Perm())
	}
	for _, p := range []string{"ci.pub.asc", "ci.pub.gpg"} {
		if _, err := os.Stat(filepath.Join(dir, "keys", p)); err != nil {
			t.Errorf("key generate did not write %s: %v", p, err)
		}
	}
	armorFails(t, 1, []string{secret, "--force"}, "key", "generate", "--algo", "eddsa", "--out", secret)

	// import: a key made by real gpg, exported protected by its passphrase.
	gnupg := gnupgHome(t)
	genv := []string{"GNUPGHOME=" + gnupg}
	gpgPass := []string{"--batch", "--pinentry-mode", "loopback", "--passphrase", "gpg pass"}
	runTool(t, dir, genv, "gpg", append(gpgPass, "--quick-gen-key", "GPG Made <gpg@armor.invalid>", "ed25519", "sign", "never")...)
	exported := runTool(t, dir, genv, "gpg", append(gpgPass, "--export-secret-keys", "--armor")...)
	gpgFpr := ""
	for _, line := range strings.Split(runTool(t, dir, genv, "gpg", "--batch", "--with-colons", "--list-secret-keys"), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && gpgFpr == "" {
			gpgFpr = f[9]
		}
	}
	if gpgFpr == "" {
		t.Fatal("gpg listed no fingerprint")
	}
	gpgSecret := filepath.Join(dir, "gpg-secret.asc")
	if err := os.WriteFile(gpgSecret, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	imported := filepath.Join(dir, "keys", "imported.sec.asc")
	t.Setenv("ARMOR_KEY_PASSPHRASE", "wrong")
	armorFails(t, 1, []string{gpgSecret}, "key", "import", gpgSecret, "--out", imported)
	if _, err := os.Stat(imported); err == nil {
		t.Error("a failed import wrote the key file")
	}
	t.Setenv("ARMOR_KEY_PASSPHRASE", "gpg pass")
	out = armorOK(t, "key", "import", gpgSecret, "--out", imported)
	if !strings.Contains(out, gpgFpr) || !strings.Contains(out, "GPG Made <gpg@armor.invalid>") {
		t.Errorf("key import output lacks gpg's fingerprint %s:\n%s", gpgFpr, out)
	}
	if fi, err := os.Stat(imported); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("imported key: %v", err)
	}

	// list: both keys, each under the passphrase of the environment.
	out = armorOK(t, "key", "list", "--dir", filepath.Join(dir, "keys"))
	if !strings.Contains(out, gpgFpr) {
		t.Errorf("key list lacks the imported key %s:\n%s", gpgFpr, out)
	}
	if !strings.Contains(out, "wrong passphrase") || !strings.Contains(out, secret) {
		t.Errorf("key list does not say the key protected by another passphrase cannot be read:\n%s", out)
	}
	t.Setenv("ARMOR_KEY_PASSPHRASE", "pass one")
	out = armorOK(t, "--json", "key", "list", "--dir", filepath.Join(dir, "keys"))
	var rows []struct {
		Path, Fingerprint, Algorithm, Error string
		UserID                              string `json:"user_id"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("key list --json: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[0].Path != secret || rows[0].Error != "" || rows[0].UserID != "CI key <ci@armor.invalid>" {
		t.Errorf("key list --json = %+v", rows)
	}
	ciFpr := rows[0].Fingerprint

	// export: the public key, which real gpg reads with the same fingerprint.
	base := filepath.Join(dir, "export", "ci")
	out = armorOK(t, "key", "export", "--key", secret, "--out", base)
	if !strings.Contains(out, ciFpr) {
		t.Errorf("key export output lacks %s:\n%s", ciFpr, out)
	}
	for _, ext := range []string{".asc", ".gpg"} {
		cols := runTool(t, dir, genv, "gpg", "--batch", "--with-colons", "--show-keys", base+ext)
		if !strings.Contains(cols, "fpr:::::::::"+ciFpr+":") {
			t.Errorf("gpg --show-keys %s lacks %s:\n%s", base+ext, ciFpr, cols)
		}
	}
	armorFails(t, 1, []string{filepath.Join(dir, "nope.sec.asc"), "does not exist"}, "key", "export", "--key", filepath.Join(dir, "nope.sec.asc"), "--out", base)

	// The key gpg made signs a release that verifies against gpg's own public key.
	t.Setenv("ARMOR_KEY_PASSPHRASE", "gpg pass")
	proj := filepath.Join(dir, "proj")
	cfg := newProject(t, proj, projectOptions{key: imported})
	armorOK(t, "-c", cfg, "build")
	pub := filepath.Join(dir, "gpg-public.gpg")
	runTool(t, dir, genv, "gpg", "--batch", "--output", pub, "--export", gpgFpr)
	armorOK(t, "verify", filepath.Join(proj, testTreeName), "--keyring", pub)
	tree := filepath.Join(proj, testTreeName, "dists", testCodename)
	runTool(t, tree, nil, "gpgv", "--keyring", pub, "InRelease")
	runTool(t, tree, nil, "gpgv", "--keyring", pub, "Release.gpg", "Release")
}

func TestBuildErrors(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	cases := []struct {
		name  string
		opts  projectOptions
		pass  string
		setup func(t *testing.T, proj string)
		want  []string
	}{
		{
			name: "wrong passphrase",
			opts: projectOptions{key: abs(t, protectedKey)},
			pass: "not-the-passphrase",
			want: []string{abs(t, protectedKey), "wrong passphrase"},
		},
		{
			name: "no passphrase for a protected key",
			opts: projectOptions{key: abs(t, protectedKey)},
			want: []string{abs(t, protectedKey), "encrypted", "ARMOR_KEY_PASSPHRASE"},
		},
		{
			name: "missing key file",
			opts: projectOptions{key: filepath.Join(dir, "missing.sec.asc")},
			want: []string{filepath.Join(dir, "missing.sec.asc"), "does not exist", "armor key generate"},
		},
		{
			name: "not a key",
			opts: projectOptions{key: abs(t, "../testdata/keys/README.md")},
			want: []string{abs(t, "../testdata/keys/README.md")},
		},
		{
			name: "unknown key in armor.toml",
			opts: projectOptions{extra: "\n[output]\ntree = \"public\"\ncompress = \"zstd\"\n"},
			want: []string{testConfigName, "unknown key", "18| compress ="},
		},
		{
			name: "invalid field in armor.toml",
			opts: projectOptions{extra: "\n[output]\n", archs: []string{"x86_64"}},
			want: []string{testConfigName, `architecture "x86_64"`},
		},
		{
			name:  "armor.toml missing",
			setup: func(t *testing.T, proj string) { os.Remove(filepath.Join(proj, testConfigName)) },
			want:  []string{testConfigName, "no such file"},
		},
		{
			name: "damaged manifest",
			setup: func(t *testing.T, proj string) {
				os.WriteFile(filepath.Join(proj, testManifestName), []byte("schema = 1\nid = 3\n"), 0o644)
			},
			want: []string{testManifestName, "restore it from git"},
		},
		{
			name: "input pattern matches nothing",
			setup: func(t *testing.T, proj string) {
				if err := os.RemoveAll(filepath.Join(proj, "debs")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`suite stable component main: input pattern "debs/*.deb" (relative to`, "matches no file", "does not exist)", "allow_empty = true"},
		},
		{
			name: "bad SOURCE_DATE_EPOCH",
			setup: func(t *testing.T, proj string) {
				t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
			},
			want: []string{"SOURCE_DATE_EPOCH", "yesterday"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("ARMOR_KEY_PASSPHRASE", c.pass)
			proj := filepath.Join(t.TempDir(), "p")
			c.opts.noDebs = true
			cfg := newProjectUnchecked(t, proj, c.opts)
			if err := os.MkdirAll(filepath.Join(proj, "debs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := synth.WriteOne(filepath.Join(proj, "debs"), "hello", "1.0-1", "amd64", ""); err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(t, proj)
			}
			armorFails(t, 1, c.want, "-c", cfg, "build")
			if _, err := os.Stat(filepath.Join(proj, testTreeName, "dists")); err == nil {
				t.Error("a failed build wrote a tree")
			}
		})
	}

	// With the right passphrase the protected key builds.
	t.Setenv("ARMOR_KEY_PASSPHRASE", protectedPass)
	proj := filepath.Join(dir, "ok")
	cfg := newProject(t, proj, projectOptions{key: abs(t, protectedKey), archs: []string{"amd64"}})
	armorOK(t, "-c", cfg, "build")
	armorOK(t, "verify", filepath.Join(proj, testTreeName), "--keyring", abs(t, "../testdata/keys/protected.pub.gpg"))

	// push before any build
	proj = filepath.Join(dir, "unbuilt")
	cfg = newProject(t, proj, projectOptions{store: filepath.Join(dir, "store"), noDebs: true})
	armorFails(t, 1, []string{filepath.Join(proj, testManifestName), "run `armor build` first"}, "-c", cfg, "push", "--store-only")
}

// newProjectUnchecked is newProject for configurations meant to be refused.
func newProjectUnchecked(t *testing.T, dir string, o projectOptions) string {
	t.Helper()
	if o.key == "" {
		o.key = abs(t, eddsaKey)
	}
	archs := o.archs
	if len(archs) == 0 {
		archs = []string{"amd64"}
	}
	toml := "[repository]\nname = \"test\"\nhostnames = [\"" + testHost + "\"]\n\n[[suite]]\ncodename = \"stable\"\n" +
		"components = [\"main\"]\narchitectures = [\"" + strings.Join(archs, `", "`) + "\"]\n\n[suite.inputs]\nmain = [\"debs/*.deb\"]\n\n" +
		"[signing]\n" + o.extra
	if !o.noKey {
		toml = strings.Replace(toml, "[signing]\n", "[signing]\nkey = "+strconv.Quote(o.key)+"\n", 1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, testConfigName)
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBuildJSONAndUpToDate(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{})
	out := armorOK(t, "-c", cfg, "build", "--json")
	var res struct {
		Manifest, Tree, Release string
		UpToDate                bool `json:"up_to_date"`
		Stats                   struct{ Packages, Inputs, Read, Added int }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("build --json is not JSON: %v\n%s", err, out)
	}
	m := loadManifest(t, filepath.Join(proj, testManifestName))
	if res.Manifest != filepath.Join(proj, testManifestName) || res.Tree != filepath.Join(proj, testTreeName) ||
		res.Release != m.ID || res.UpToDate || res.Stats.Packages != testPackagesCount ||
		res.Stats.Inputs != testPackagesCount || res.Stats.Read != testPackagesCount || res.Stats.Added != testPackagesCount {
		t.Errorf("build --json = %+v; manifest id %s", res, m.ID)
	}

	out = armorOK(t, "-c", cfg, "build")
	if !strings.Contains(out, "up to date") || !strings.Contains(out, m.ID[:12]) {
		t.Errorf("second build: %s", out)
	}
	if again := loadManifest(t, filepath.Join(proj, testManifestName)); again.ID != m.ID {
		t.Errorf("an up-to-date build changed the manifest: %s -> %s", m.ID, again.ID)
	}
	out = armorOK(t, "--json", "-c", cfg, "build")
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.UpToDate || res.Release != m.ID || res.Stats.Read != 0 {
		t.Errorf("second build --json: %v %+v", err, res)
	}
}

// TestBuildReproducible builds the same inputs with the same key and SOURCE_DATE_EPOCH
// in two directories, and compares every file of the two trees and the two manifests
// byte for byte: signatures included, so the manifest ids agree too.
func TestBuildReproducible(t *testing.T) {
	isolate(t)
	t.Setenv("SOURCE_DATE_EPOCH", testDate)
	work := t.TempDir()
	a := newProject(t, filepath.Join(work, "a"), projectOptions{})
	b := newProject(t, filepath.Join(work, "b"), projectOptions{})
	armorOK(t, "-c", a, "build")
	armorOK(t, "-c", b, "build")

	ma := loadManifest(t, filepath.Join(work, "a", testManifestName))
	if ma.Date != "2026-01-01T00:00:00Z" {
		t.Errorf("manifest date %q does not follow SOURCE_DATE_EPOCH", ma.Date)
	}
	if !bytes.Equal(readFileT(t, filepath.Join(work, "a", testManifestName)), readFileT(t, filepath.Join(work, "b", testManifestName))) {
		t.Errorf("the manifests differ")
	}
	if n := diffTrees(t, filepath.Join(work, "a", testTreeName), filepath.Join(work, "b", testTreeName)); n < testPackagesCount+6 {
		t.Errorf("compared only %d files", n)
	}
}

// diffTrees compares every file of two trees byte for byte, and returns how many.
func diffTrees(t *testing.T, a, b string) int {
	t.Helper()
	files := map[string]bool{}
	for _, root := range []string{a, b} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(root, p)
				files[rel] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for rel := range files {
		fa, errA := os.ReadFile(filepath.Join(a, rel))
		fb, errB := os.ReadFile(filepath.Join(b, rel))
		if errA != nil || errB != nil || !bytes.Equal(fa, fb) {
			t.Errorf("%s differs between the two builds (%v, %v)", rel, errA, errB)
		}
	}
	return len(files)
}

func TestDiff(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{})
	debs := filepath.Join(proj, "debs")
	old, err := synth.WriteOne(debs, "hello", "1.0-1", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	armorOK(t, "-c", cfg, "build")
	oldManifest := filepath.Join(t.TempDir(), "old.toml")
	if err := os.WriteFile(oldManifest, readFileT(t, filepath.Join(proj, testManifestName)), 0o644); err != nil {
		t.Fatal(err)
	}
	// hello upgraded, newpkg added, pkg000003 removed. A file gone from the inputs
	// removes nothing: the parent is the truth.
	os.Remove(old)
	for _, p := range []struct{ name, version string }{{"hello", "1.1-1"}, {"newpkg", "0.1-1"}} {
		if _, err := synth.WriteOne(debs, p.name, p.version, "amd64", ""); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := filepath.Glob(filepath.Join(debs, synth.Name(3)+"_*.deb"))
	if err != nil || len(removed) != 1 {
		t.Fatalf("find %s: %v %v", synth.Name(3), removed, err)
	}
	os.Remove(removed[0])
	armorOK(t, "-c", cfg, "build")
	if m := loadManifest(t, filepath.Join(proj, testManifestName)); !slices.ContainsFunc(m.Packages, func(p manifest.Package) bool { return p.Name == synth.Name(3) }) {
		t.Fatalf("a build after %s's file was deleted removed the package", synth.Name(3))
	}
	out := armorOK(t, "-c", cfg, "remove", "hello=1.0-1", synth.Name(3))
	for _, want := range []string{"- hello", "- " + synth.Name(3), "0 added or changed, 2 removed"} {
		if !strings.Contains(out, want) {
			t.Errorf("armor remove output lacks %q:\n%s", want, out)
		}
	}
	armorFails(t, 1, []string{"remove hello=1.0-1", "no such package", "nothing was changed"}, "-c", cfg, "remove", "hello=1.0-1")
	newManifest := filepath.Join(proj, testManifestName)

	out = armorOK(t, "diff", oldManifest, newManifest)
	for _, want := range []string{"hello", "1.0-1 -> 1.1-1", "(upgraded)", "+ newpkg", "0.1-1", "- " + synth.Name(3), "stable/main/amd64"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, synth.Name(4)) {
		t.Errorf("diff mentions an unchanged package:\n%s", out)
	}

	out = armorOK(t, "--json", "diff", oldManifest, newManifest)
	var changes []manifest.Change
	if err := json.Unmarshal([]byte(out), &changes); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, out)
	}
	kinds := map[string]string{}
	for _, c := range changes {
		kinds[c.Name] = c.Kind + " " + c.Old + ">" + c.New
	}
	want := map[string]string{"hello": "upgraded 1.0-1>1.1-1", "newpkg": "added >0.1-1", synth.Name(3): "removed 1.0-1>"}
	if len(kinds) != len(want) {
		t.Errorf("diff --json = %+v, want %v", changes, want)
	}
	for name, w := range want {
		if kinds[name] != w {
			t.Errorf("diff --json: %s is %q, want %q", name, kinds[name], w)
		}
	}

	out = armorOK(t, "diff", newManifest, newManifest)
	if !strings.Contains(out, "no package changes") {
		t.Errorf("diff of a manifest with itself: %s", out)
	}
	out = armorOK(t, "--json", "diff", newManifest, newManifest)
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("diff --json of a manifest with itself: %s", out)
	}
	// One manifest: against the working manifest.
	if one := armorOK(t, "-c", cfg, "diff", oldManifest); one != armorOK(t, "diff", oldManifest, newManifest) {
		t.Errorf("diff OLD differs from diff OLD WORKING:\n%s", one)
	}
	armorFails(t, 1, []string{"missing.toml"}, "diff", oldManifest, filepath.Join(proj, "missing.toml"))
}

func TestVerify(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{})
	armorOK(t, "-c", cfg, "build")
	tree := filepath.Join(proj, testTreeName)
	keyring := abs(t, eddsaKeyring)

	out := armorOK(t, "verify", tree, "--keyring", keyring, "--pool")
	if !strings.Contains(out, "ok: 1 suite(s)") || !strings.Contains(out, strconv.Itoa(testPackagesCount)+" pool file(s)") {
		t.Errorf("verify: %s", out)
	}
	out = armorOK(t, "--json", "verify", tree, "--keyring", keyring)
	var rep struct {
		Suites, Indexes int
		Problems        []string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Suites != 1 || rep.Indexes == 0 || rep.Problems == nil || len(rep.Problems) != 0 {
		t.Errorf("verify --json: %v %+v\n%s", err, rep, out)
	}

	// Signed by another key: refused.
	armorFails(t, 1, []string{"does not verify"}, "verify", tree, "--keyring", abs(t, "../testdata/keys/rsa.pub.gpg"))

	cases := []struct {
		name string
		path string // in the tree
		pool bool
	}{
		{"index", "dists/stable/main/binary-amd64/Packages.gz", false},
		{"pool file", "", true},
	}
	m := loadManifest(t, filepath.Join(proj, testManifestName))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.path
			if p == "" {
				p = m.Packages[0].Path
			}
			full := filepath.Join(tree, filepath.FromSlash(p))
			orig := readFileT(t, full)
			t.Cleanup(func() { os.WriteFile(full, orig, 0o644) })
			bad := bytes.Clone(orig)
			bad[len(bad)/2] ^= 0xff
			if err := os.WriteFile(full, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"verify", tree, "--keyring", keyring}
			if c.pool {
				args = append(args, "--pool")
			}
			r := armorFails(t, 1, []string{"does not verify", p}, args...)
			if !strings.Contains(r.stdout, "FAIL") || !strings.Contains(r.stdout, p) {
				t.Errorf("verify output does not name %s:\n%s", p, r.stdout)
			}
			if strings.Contains(r.stdout, "ok:") {
				t.Errorf("verify of a tampered tree printed ok:\n%s", r.stdout)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	isolate(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"publish"}, exitUsage, "unexpected argument publish"},
		{"unknown flag", []string{"build", "--fast"}, exitUsage, "--fast"},
		{"init without a name", []string{"init", "--dir", t.TempDir()}, exitUsage, "--name"},
		{"verify without a keyring", []string{"verify", t.TempDir()}, exitUsage, "--keyring"},
		{"verify a URL without suites", []string{"verify", "http://127.0.0.1:1/", "--keyring", eddsaKeyring}, exitUsage, "--suite"},
		{"bad key algorithm", []string{"key", "generate", "--algo", "dsa", "--out", filepath.Join(t.TempDir(), "k")}, exitUsage, "dsa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			armorFails(t, c.code, []string{c.want}, c.args...)
		})
	}
	if out := armorOK(t, "version"); !strings.HasPrefix(out, "armor ") {
		t.Errorf("version: %q", out)
	}
}

// TestReleasesListNewestFirst pushes three releases, one on another, and checks that
// armor releases list shows them newest first (as its help says), in text and in
// --json, with the active one marked.
func TestReleasesListNewestFirst(t *testing.T) {
	isolate(t)
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	var pushed []string // oldest first
	for i, add := range [][]string{nil, {"alpha"}, {"beta"}} {
		if i > 0 {
			p.add(t, add...)
		}
		armorOK(t, "-c", p.cfg, "push")
		pushed = append(pushed, loadManifest(t, p.manifestPath()).ID)
	}
	want := slices.Clone(pushed)
	slices.Reverse(want)

	var rels []api.Release
	if err := json.Unmarshal([]byte(armorOK(t, "--json", "-c", p.cfg, "releases", "list")), &rels); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rels {
		got = append(got, r.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("releases list --json: got\n%q\nwant newest first\n%q", got, want)
	}

	lines := strings.Split(strings.TrimSpace(armorOK(t, "-c", p.cfg, "releases", "list")), "\n")
	got = got[:0]
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "*" {
			f = f[1:]
			if f[0] != short(want[0]) {
				t.Errorf("releases list marks %s active, want %s:\n%s", f[0], short(want[0]), strings.Join(lines, "\n"))
			}
		}
		got = append(got, f[0])
	}
	for i := range want {
		want[i] = short(want[i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("releases list: got\n%q\nwant newest first\n%q\n%s", got, want, strings.Join(lines, "\n"))
	}
}

// TestNoArgumentsPrintsHelp: a bare armor prints the help, exit codes included, on
// standard output with status 0 (as restic does), like armor --help.
func TestNoArgumentsPrintsHelp(t *testing.T) {
	isolate(t)
	bare := armor(t)
	help := armor(t, "--help")
	for _, r := range []result{bare, help} {
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("want the help and exit 0, got %s", r)
		}
	}
	if bare.stdout != help.stdout {
		t.Errorf("armor prints other than armor --help:\n%s\n---\n%s", bare.stdout, help.stdout)
	}
	for _, want := range []string{"Usage: armor <command>", "Commands:", "releases list",
		"Exit status: 0 success; 1 error; 2 usage error",
		"3 a push refused because the release it was built on is no longer the active one",
		`{"error": "...", "exit_code": N}`} {
		if !strings.Contains(strings.Join(strings.Fields(help.stdout), " "), want) {
			t.Errorf("armor --help lacks %q:\n%s", want, help.stdout)
		}
	}
	if kongCode(kongUsage) != exitUsage {
		t.Errorf("kong's usage exit %d maps to %d, want %d", kongUsage, kongCode(kongUsage), exitUsage)
	}
}

// versionBinary is the binary the version test reads: $ARMOR_BIN (bin/armor after make
// build), or one built by the Makefile, which is how a commit gets into it.
func versionBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("ARMOR_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "armor")
	if out, err := exec.Command(needTool(t, "make"), "-C", "..", "build", "ARMOR="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	return bin
}

// TestVersion: armor version and armor --version print the module version and the
// commit the binary was built from (HEAD of this checkout), and --json the same fields.
func TestVersion(t *testing.T) {
	bin := versionBinary(t)
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r, err := runBinary(bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		if r.code != exitOK {
			t.Fatalf("armor %s: %s", args[0], r)
		}
		lines = append(lines, r.stdout)
	}
	if lines[0] != lines[1] {
		t.Errorf("armor version and armor --version differ:\n%s%s", lines[0], lines[1])
	}
	r, err := runBinary(bin, "--json", "version")
	if err != nil || r.code != exitOK {
		t.Fatalf("armor --json version: %v %s", err, r)
	}
	var v buildVersion
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("armor --json version: %v\n%s", err, r.stdout)
	}
	if v.Version == "" || v.Commit == "" && commit != "unknown" || v.Commit != "" && v.Commit != commit {
		t.Errorf("armor --json version: %+v, want a version and commit %s (is $ARMOR_BIN built from this checkout? make build)", v, commit)
	}
	want := "armor " + v.Version + ", commit " + commit
	if v.Modified {
		want += " (modified)"
	}
	if !strings.HasPrefix(lines[0], want+", go") {
		t.Errorf("armor version: %q, want it to start %q", lines[0], want)
	}
	// The backends it carries: local and s3 in the default build (make build); every
	// one, gcs among them, with -tags allbackends (make build-all, deb, dist).
	wantBackends, line := []string{"local", "s3"}, "rclone backends: "
	if v.AllBackends {
		wantBackends, line = append(wantBackends, "gcs", "azureblob", "sftp"), "rclone backends: all "
	} else if slices.Contains(v.Backends, "gcs") {
		t.Errorf("armor --json version: backends %q include gcs, which the default build lacks", v.Backends)
	}
	for _, b := range wantBackends {
		if !slices.Contains(v.Backends, b) || !strings.Contains(lines[0], " "+b+",") && !strings.Contains(lines[0], " "+b+" ") {
			t.Errorf("armor version does not name the %s backend: %q (json %q)", b, lines[0], v.Backends)
		}
	}
	if second := strings.SplitN(lines[0], "\n", 3); len(second) < 2 || !strings.HasPrefix(second[1], line) {
		t.Errorf("armor version: want a second line starting %q, got %q", line, lines[0])
	}
}

// TestJSONErrors: under --json, whatever fails (a usage error under any command, a
// command's own error, a refused push) prints one JSON object on standard error with
// the message and the exit code, and nothing else there.
func TestJSONErrors(t *testing.T) {
	isolate(t)
	missing := filepath.Join(t.TempDir(), "armor.toml")
	type errCase struct {
		name string
		args []string
		code int
		want string
	}
	cases := []errCase{
		{"unknown command", []string{"--json", "publish"}, exitUsage, "unexpected argument publish"},
		{"--json=true after the error", []string{"frobnicate", "--json=true"}, exitUsage, "frobnicate"},
		{"usage error from a command", []string{"--json", "verify", "http://127.0.0.1:1/", "--keyring", eddsaKeyring}, exitUsage, "--suite"},
		{"command error", []string{"--json", "-c", missing, "build"}, exitFailure, missing},
		{"controld command error", []string{"--json", "-c", missing, "releases", "list"}, exitFailure, missing},
	}
	// Every command, with a flag none of them takes.
	var c CLI
	parser, err := kong.New(&c, kong.Name("armor"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range parser.Model.Leaves(false) {
		args := append(strings.Fields(n.Path()), "--no-such-flag", "--json")
		cases = append(cases, errCase{"usage " + n.Path(), args, exitUsage, "--no-such-flag"})
	}
	check := func(t *testing.T, r result, code int, want string) {
		t.Helper()
		if r.code != code {
			t.Fatalf("want exit %d, got %s", code, r)
		}
		dec := json.NewDecoder(strings.NewReader(r.stderr))
		dec.DisallowUnknownFields()
		var e errorJSON
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("stderr is not a JSON error (%v): %s", err, r)
		}
		if dec.More() {
			t.Errorf("stderr holds more than one JSON object: %s", r)
		}
		if e.ExitCode != code || !strings.Contains(e.Error, want) {
			t.Errorf("JSON error %+v: want exit_code %d and an error naming %q", e, code, want)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check(t, armor(t, tc.args...), tc.code, tc.want)
		})
	}

	t.Run("push refused on a stale parent", func(t *testing.T) {
		site := newControldSite(t)
		base := site.project(t)
		armorOK(t, "-c", base.cfg, "repos", "create")
		armorOK(t, "-c", base.cfg, "push")
		x, y := base.clone(t), base.clone(t)
		x.add(t, "alpha")
		y.add(t, "beta")
		armorOK(t, "-c", x.cfg, "push")
		r := armor(t, "--json", "-c", y.cfg, "push")
		check(t, r, exitStaleParent, "armor push --rebase")
		var out pushResult
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Outcome != outcomeStaleParent {
			t.Errorf("stdout is not push's own result (%v): %s", err, r)
		}
	})
}
