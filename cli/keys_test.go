package cli

// Where the signing key and its passphrase come from, as a user (or a CI runner) meets
// it: the environment over armor.toml, the published keyring as a guard, and the errors
// for bad input.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

// Fingerprints of the fixed test keys (testdata/keys/README.md).
const (
	rsaFpr       = "23126D40EA6C7D852299B8D5A413F50BCB095712"
	eddsaFpr     = "46B67D6D4CA63BE43550B392875011482ECCA006"
	protectedFpr = "704FC81CEADEF8BB40F5E844CABEA6DA745A6801"
	rsaKey       = "../testdata/keys/rsa.sec.asc"
)

// writeT writes a file (and its directory), failing the test on an error.
func writeT(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		writeT(t, filepath.Join(dst, rel), readFileT(t, p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFreshRunner is a CI runner: a checkout of armor.toml, manifest.toml and keys/ with
// the new .deb files, no .armor/, and the secret key from the environment. The release it
// builds verifies with real gpgv against the keyring in keys/, which is what apt users
// have installed.
func TestFreshRunner(t *testing.T) {
	gpgv := needTool(t, "gpgv")
	protectedSecret := string(readFileT(t, protectedKey))
	cases := []struct {
		name string
		// workstation prepares the project armor init made in dir and returns the
		// environment of its first build.
		workstation func(t *testing.T, dir, cfg string) map[string]string
		// runner returns the runner's environment, given a directory for secret files.
		runner func(t *testing.T, secrets, workstation string) map[string]string
		fpr    string
	}{
		{
			name:        "init's key in ARMOR_SIGNING_KEY",
			workstation: func(t *testing.T, dir, cfg string) map[string]string { return nil },
			runner: func(t *testing.T, secrets, workstation string) map[string]string {
				return map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, filepath.Join(workstation, ".armor", "keys", "signing.sec.asc")))}
			},
		},
		{
			name: "protected key in ARMOR_SIGNING_KEY, passphrase in ARMOR_KEY_PASSPHRASE_FILE",
			workstation: func(t *testing.T, dir, cfg string) map[string]string {
				// The repository changes to the protected key: its public key is
				// published in keys/ first, exported through the same loader.
				env := map[string]string{"ARMOR_SIGNING_KEY_FILE": abs(t, protectedKey), "ARMOR_KEY_PASSPHRASE": protectedPass}
				setEnv(t, env)
				out := armorOK(t, "-c", cfg, "key", "export", "--out", filepath.Join(dir, "keys", "x-archive-keyring"))
				if !strings.Contains(out, protectedFpr) {
					t.Fatalf("key export from the environment: %s", out)
				}
				return env
			},
			runner: func(t *testing.T, secrets, workstation string) map[string]string {
				pass := filepath.Join(secrets, "passphrase")
				writeT(t, pass, []byte(protectedPass+"\n"))
				return map[string]string{"ARMOR_SIGNING_KEY": protectedSecret, "ARMOR_KEY_PASSPHRASE_FILE": pass}
			},
			fpr: protectedFpr,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("SOURCE_DATE_EPOCH", testDate)
			ws := filepath.Join(t.TempDir(), "ws")
			armorOK(t, "init", "--dir", ws, "--name", "x", "--hostname", "a.test", "--key-algo", "eddsa")
			cfg := filepath.Join(ws, "armor.toml")
			setEnv(t, c.workstation(t, ws, cfg))
			if _, err := synth.Write(filepath.Join(ws, "debs"), synth.Options{N: 3, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			armorOK(t, "-c", cfg, "build")

			// The runner: the checkout and the new .deb, nothing of .armor/.
			isolate(t)
			t.Setenv("SOURCE_DATE_EPOCH", testDate)
			runner := filepath.Join(t.TempDir(), "runner")
			for _, f := range []string{"armor.toml", "manifest.toml"} {
				writeT(t, filepath.Join(runner, f), readFileT(t, filepath.Join(ws, f)))
			}
			copyTree(t, filepath.Join(ws, "keys"), filepath.Join(runner, "keys"))
			copyTree(t, filepath.Join(ws, "debs"), filepath.Join(runner, "debs"))
			if _, err := synth.WriteOne(filepath.Join(runner, "debs"), "newcomer", "1.0-1", "amd64", ""); err != nil {
				t.Fatal(err)
			}
			rcfg := filepath.Join(runner, "armor.toml")
			// Without the key from the environment, build says both ways to give one.
			armorFails(t, 1, []string{filepath.Join(runner, ".armor", "keys", "signing.sec.asc"), "does not exist", "ARMOR_SIGNING_KEY", "ARMOR_SIGNING_KEY_FILE"}, "-c", rcfg, "build")
			if _, err := os.Stat(filepath.Join(runner, ".armor", "keys")); err == nil {
				t.Fatal("the runner has .armor/keys")
			}
			setEnv(t, c.runner(t, t.TempDir(), ws))
			out := armorOK(t, "-c", rcfg, "build")
			if !strings.Contains(out, "built release") {
				t.Errorf("runner build: %s", out)
			}
			if m := readFileT(t, filepath.Join(runner, "manifest.toml")); !strings.Contains(string(m), "newcomer") {
				t.Errorf("the runner's manifest lacks the new package:\n%s", m)
			}
			keyring := filepath.Join(runner, "keys", "x-archive-keyring.gpg")
			tree := filepath.Join(runner, "public", "dists", "stable")
			status := runTool(t, tree, nil, gpgv, "--status-fd", "1", "--keyring", keyring, "InRelease")
			runTool(t, tree, nil, gpgv, "--keyring", keyring, "Release.gpg", "Release")
			if c.fpr != "" && !strings.Contains(status, c.fpr) {
				t.Errorf("InRelease is not signed by %s:\n%s", c.fpr, status)
			}
		})
	}
}

// helloProject writes a project of one package in dir, with armor.toml as o says
// (unchecked, so that it may be one a build refuses), and returns armor.toml's path.
func helloProject(t *testing.T, dir string, o projectOptions) string {
	t.Helper()
	o.noDebs = true
	cfg := newProjectUnchecked(t, dir, o)
	if err := os.MkdirAll(filepath.Join(dir, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(dir, "debs"), "hello", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// setEnv sets each variable for the rest of the test.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestSigningKeyPrecedence builds with keys and passphrases from several places at once
// and checks which key signed: the environment wins over armor.toml.
func TestSigningKeyPrecedence(t *testing.T) {
	dir := t.TempDir()
	right, wrong := filepath.Join(dir, "right"), filepath.Join(dir, "wrong")
	writeT(t, right, []byte(protectedPass+"\n"))
	writeT(t, wrong, []byte("not-the-passphrase\n"))
	cases := []struct {
		name    string
		opts    projectOptions
		env     map[string]string
		keyring string // the key that must have signed
	}{
		{name: "signing.key alone", keyring: eddsaKeyring},
		{name: "ARMOR_SIGNING_KEY over signing.key",
			env: map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, rsaKey))}, keyring: "../testdata/keys/rsa.pub.gpg"},
		{name: "ARMOR_SIGNING_KEY_FILE over signing.key",
			env: map[string]string{"ARMOR_SIGNING_KEY_FILE": abs(t, rsaKey)}, keyring: "../testdata/keys/rsa.pub.gpg"},
		{name: "ARMOR_SIGNING_KEY without signing.key", opts: projectOptions{noKey: true},
			env: map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, eddsaKey))}, keyring: eddsaKeyring},
		{name: "ARMOR_KEY_PASSPHRASE_FILE over signing.passphrase_file",
			opts:    projectOptions{key: abs(t, protectedKey), extra: "passphrase_file = " + `"` + wrong + `"` + "\n"},
			env:     map[string]string{"ARMOR_KEY_PASSPHRASE_FILE": right},
			keyring: "../testdata/keys/protected.pub.gpg"},
		{name: "ARMOR_KEY_PASSPHRASE over signing.passphrase_env",
			opts:    projectOptions{key: abs(t, protectedKey), extra: "passphrase_env = \"MY_PASS\"\n"},
			env:     map[string]string{"ARMOR_KEY_PASSPHRASE": protectedPass, "MY_PASS": "not-the-passphrase"},
			keyring: "../testdata/keys/protected.pub.gpg"},
		{name: "signing.passphrase_file for a key from ARMOR_SIGNING_KEY", opts: projectOptions{extra: "passphrase_file = " + `"` + right + `"` + "\n"},
			env:     map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, protectedKey))},
			keyring: "../testdata/keys/protected.pub.gpg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			setEnv(t, c.env)
			proj := filepath.Join(t.TempDir(), "p")
			cfg := helloProject(t, proj, c.opts)
			armorOK(t, "-c", cfg, "build")
			armorOK(t, "verify", filepath.Join(proj, testTreeName), "--keyring", abs(t, c.keyring))
		})
	}
}

// TestSigningKeyErrors: each bad key or passphrase is a clear error, naming where it
// came from, before anything is built.
func TestSigningKeyErrors(t *testing.T) {
	dir := t.TempDir()
	wrongPass, emptyPass := filepath.Join(dir, "wrong"), filepath.Join(dir, "empty")
	writeT(t, wrongPass, []byte("not-the-passphrase\n"))
	writeT(t, emptyPass, []byte("\n"))
	protectedSecret := string(readFileT(t, protectedKey))
	published := func(file, fixture string) func(t *testing.T, proj string) {
		return func(t *testing.T, proj string) {
			writeT(t, filepath.Join(proj, "keys", "test-archive-keyring"+file), readFileT(t, "../testdata/keys/"+fixture))
		}
	}
	cases := []struct {
		name  string
		opts  projectOptions
		env   map[string]string
		setup func(t *testing.T, proj string)
		want  []string
	}{
		{name: "ARMOR_SIGNING_KEY holds a public key",
			env:  map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, "../testdata/keys/eddsa.pub.asc"))},
			want: []string{"$ARMOR_SIGNING_KEY holds no usable secret key", "no secret key found"}},
		{name: "ARMOR_SIGNING_KEY holds garbage",
			env:  map[string]string{"ARMOR_SIGNING_KEY": "my-secret-key"},
			want: []string{"$ARMOR_SIGNING_KEY holds no usable secret key", "gpg --export-secret-keys --armor"}},
		{name: "ARMOR_SIGNING_KEY_FILE holds a public keyring",
			env:  map[string]string{"ARMOR_SIGNING_KEY_FILE": abs(t, eddsaKeyring)},
			want: []string{"$ARMOR_SIGNING_KEY_FILE (" + abs(t, eddsaKeyring) + ") holds no usable secret key"}},
		{name: "ARMOR_SIGNING_KEY_FILE names a missing file",
			env:  map[string]string{"ARMOR_SIGNING_KEY_FILE": filepath.Join(dir, "gone.asc")},
			want: []string{"$ARMOR_SIGNING_KEY_FILE", "no such file"}},
		{name: "both key variables",
			env:  map[string]string{"ARMOR_SIGNING_KEY": protectedSecret, "ARMOR_SIGNING_KEY_FILE": abs(t, protectedKey)},
			want: []string{"both $ARMOR_SIGNING_KEY and $ARMOR_SIGNING_KEY_FILE are set"}},
		{name: "both passphrase variables",
			env:  map[string]string{"ARMOR_KEY_PASSPHRASE": protectedPass, "ARMOR_KEY_PASSPHRASE_FILE": wrongPass},
			want: []string{"both $ARMOR_KEY_PASSPHRASE and $ARMOR_KEY_PASSPHRASE_FILE are set"}},
		{name: "wrong passphrase from ARMOR_KEY_PASSPHRASE_FILE",
			env:  map[string]string{"ARMOR_SIGNING_KEY": protectedSecret, "ARMOR_KEY_PASSPHRASE_FILE": wrongPass},
			want: []string{"signing key from $ARMOR_SIGNING_KEY: wrong passphrase from $ARMOR_KEY_PASSPHRASE_FILE (" + wrongPass + ")"}},
		{name: "wrong passphrase from ARMOR_KEY_PASSPHRASE",
			opts: projectOptions{key: abs(t, protectedKey)},
			env:  map[string]string{"ARMOR_KEY_PASSPHRASE": "not-the-passphrase"},
			want: []string{abs(t, protectedKey), "wrong passphrase from $ARMOR_KEY_PASSPHRASE\n"}},
		{name: "wrong passphrase from signing.passphrase_file",
			opts: projectOptions{extra: `passphrase_file = "` + wrongPass + `"` + "\n"},
			env:  map[string]string{"ARMOR_SIGNING_KEY": protectedSecret},
			want: []string{"wrong passphrase from signing.passphrase_file (" + wrongPass + ")"}},
		{name: "empty passphrase file",
			env:  map[string]string{"ARMOR_SIGNING_KEY": protectedSecret, "ARMOR_KEY_PASSPHRASE_FILE": emptyPass},
			want: []string{"is encrypted, and the passphrase from $ARMOR_KEY_PASSPHRASE_FILE (" + emptyPass + ") is empty"}},
		{name: "no passphrase for a protected key from the environment",
			env:  map[string]string{"ARMOR_SIGNING_KEY": protectedSecret},
			want: []string{"signing key from $ARMOR_SIGNING_KEY is encrypted", "set $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE"}},
		{name: "no key anywhere", opts: projectOptions{noKey: true},
			want: []string{"no signing key", "$ARMOR_SIGNING_KEY (", "$ARMOR_SIGNING_KEY_FILE (", "signing.key in "}},
		{name: "signing.key not in the published keyring",
			setup: published(".gpg", "rsa.pub.gpg"),
			want:  []string{eddsaFpr, rsaFpr, "test-archive-keyring.gpg", "signing.key", "apt would reject"}},
		{name: "ARMOR_SIGNING_KEY not in the published armored key",
			env:   map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, rsaKey))},
			setup: published(".asc", "eddsa.pub.asc"),
			want:  []string{rsaFpr, eddsaFpr, "test-archive-keyring.asc", "$ARMOR_SIGNING_KEY"}},
		{name: "published .asc and .gpg disagree",
			setup: func(t *testing.T, proj string) {
				published(".asc", "eddsa.pub.asc")(t, proj)
				published(".gpg", "protected.pub.gpg")(t, proj)
			},
			want: []string{eddsaFpr, protectedFpr, "test-archive-keyring.gpg"}},
		{name: "published keyring unreadable",
			setup: func(t *testing.T, proj string) {
				writeT(t, filepath.Join(proj, "keys", "test-archive-keyring.gpg"), []byte("not a keyring"))
			},
			want: []string{"published keyring", "test-archive-keyring.gpg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			setEnv(t, c.env)
			proj := filepath.Join(t.TempDir(), "p")
			cfg := helloProject(t, proj, c.opts)
			if c.setup != nil {
				c.setup(t, proj)
			}
			armorFails(t, 1, c.want, "-c", cfg, "build")
			for _, p := range []string{testTreeName, testManifestName, ".armor"} {
				if _, err := os.Stat(filepath.Join(proj, p)); err == nil {
					t.Errorf("the refused build wrote %s", p)
				}
			}
		})
	}

	// A key matching the published keyring builds.
	isolate(t)
	proj := filepath.Join(dir, "ok")
	cfg := helloProject(t, proj, projectOptions{})
	published(".gpg", "eddsa.pub.gpg")(t, proj)
	published(".asc", "eddsa.pub.asc")(t, proj)
	armorOK(t, "-c", cfg, "build")
}

// TestReposCreateRefusesUnpublishedKey: repos create uploads the signing key's public
// half, so a key apt users' keyring lacks is refused before controld is asked anything
// (the controld URL here answers nothing).
func TestReposCreateRefusesUnpublishedKey(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProjectUnchecked(t, proj, projectOptions{noDebs: true})
	writeT(t, filepath.Join(proj, "keys", "test-archive-keyring.gpg"), readFileT(t, "../testdata/keys/rsa.pub.gpg"))
	r := armorFails(t, 1, []string{eddsaFpr, rsaFpr, "test-archive-keyring.gpg"}, "-c", cfg, "repos", "create", "--controld", "http://127.0.0.1:1")
	if strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("repos create talked to controld before checking the key:\n%s", r.stderr)
	}
}
