package cli_test

// Signing with keys that are not on the runner: a SoftHSM2 token, AWS KMS (local-kms) and
// gpg-agent, each a real implementation started by the test. Releases signed through each
// are checked by gpgv, sqv and apt-get through a real controld and edged; bad input (KMS
// unreachable, throttled, wrong PIN, a key that is not the published one) fails with a
// clear error and leaves the project as it was.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/hsmtest"
	"github.com/armor-apt/armor/internal/testkit/kmstest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// signer is one way to hold a key elsewhere: the key URI and the environment armor needs.
type signer struct {
	name, uri string
	env       []string
}

// softHSM makes a SoftHSM2 token with an RSA key; its PIN is handed over as the
// passphrase, as a CI secret would be.
func softHSM(t *testing.T) signer {
	tok := hsmtest.New(t, "armor", "4321")
	tok.GenerateRSA(t, 3072, "archive", "01")
	return signer{"softhsm", tok.URI("archive"), append(tok.Env(), "ARMOR_KEY_PASSPHRASE=4321")}
}

// localKMS starts local-kms with an RSA key behind an alias.
func localKMS(t *testing.T) (signer, *kmstest.KMS) {
	k := kmstest.Start(t)
	k.CreateKey(t, "RSA_4096", "alias/archive")
	return signer{"awskms", "awskms:///alias/archive", k.Env()}, k
}

// gpgAgent imports the EdDSA fixture key into a throwaway GNUPGHOME; gpg-agent holds it.
func gpgAgent(t *testing.T) signer {
	home, err := os.MkdirTemp("", "gnupg")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o700)
	env := []string{"GNUPGHOME=" + home}
	t.Cleanup(func() {
		cmd := exec.Command("gpgconf", "--kill", "gpg-agent")
		cmd.Env = append(os.Environ(), env...)
		cmd.Run()
		os.RemoveAll(home)
	})
	cmd := exec.Command("gpg", "--batch", "--import", "../testdata/keys/eddsa.sec.asc")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpg --import (install gnupg with .ci/install-deps): %v\n%s", err, out)
	}
	return signer{"gpg-agent", "gpg-agent:46B67D6D4CA63BE43550B392875011482ECCA006", env}
}

// newSignedProject runs armor init --key for a repository served under host.
func (c *cluster) newSignedProject(t *testing.T, name, host string, s signer) *project {
	t.Helper()
	p := &project{dir: filepath.Join(c.work, name), name: name, host: host}
	armor(t, c.work, s.env, "init", "--dir", p.dir, "--name", name, "--hostname", host,
		"--key", s.uri, "--store", c.store, "--controld", "http://"+c.controldAddr)
	armor(t, p.dir, append(c.env(), s.env...), "repos", "create")
	return p
}

// TestSignersThroughEdge: a release built and signed through each signer is accepted by
// gpgv and sqv with the published keyring, and by apt-get through the edge; no secret key
// is on disk.
func TestSignersThroughEdge(t *testing.T) {
	kms, _ := localKMS(t)
	signers := []signer{softHSM(t), kms, gpgAgent(t)}
	c := newCluster(t)
	var sources []apttest.Source
	for _, s := range signers {
		p := c.newSignedProject(t, "r"+strings.ReplaceAll(s.name, "-", ""), "apt."+s.name+".test", s)
		cfg, _ := os.ReadFile(filepath.Join(p.dir, "armor.toml"))
		if !strings.Contains(string(cfg), "key = \""+s.uri+"\"") {
			t.Errorf("%s: armor.toml does not name the key URI:\n%s", s.name, cfg)
		}
		if keys, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "keys", "*")); len(keys) > 0 {
			t.Errorf("%s: key files on disk: %v", s.name, keys)
		}
		p.setDebs(t, []pkg{{s.name + "-tool", "1.0-1", ""}})
		armor(t, p.dir, s.env, "build")
		p.push(t, c)
		waitServed(t, c.edge, p.host, p.tree())
		verifyTree(t, p)
		sources = append(sources, p.source())
	}
	apt := apttest.New(t, apttest.Options{Sources: sources, Proxy: "http://" + c.edge})
	apt.Update(t)
	for _, s := range signers {
		if got := apt.Policy(t, s.name+"-tool"); got != "1.0-1" {
			t.Errorf("apt candidate for %s-tool = %q, want 1.0-1", s.name, got)
		}
	}
	if files := apt.Download(t, "softhsm-tool", "awskms-tool", "gpg-agent-tool"); len(files) != 3 {
		t.Errorf("apt-get download: %v", files)
	}
}

// verifyTree checks the suite's InRelease and Release.gpg with gpgv and sqv against the
// project's published keyring.
func verifyTree(t *testing.T, p *project) {
	t.Helper()
	dist := filepath.Join(p.tree(), "dists", "stable")
	rel, in, gpg := filepath.Join(dist, "Release"), filepath.Join(dist, "InRelease"), filepath.Join(dist, "Release.gpg")
	for _, args := range [][]string{
		{"gpgv", "--keyring", p.keyring(), in},
		{"gpgv", "--keyring", p.keyring(), gpg, rel},
		{"sqv", "--keyring", p.keyring(), gpg, rel},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v: %v\n%s", p.name, args, err, out)
		}
	}
}

// snapshot hashes every file of a project but its build cache, to show that a failed
// command wrote nothing.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == filepath.Join(".armor", "cache") || rel == filepath.Join(".armor", "store")) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if before[k] != v {
			t.Errorf("%s changed %s", what, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s removed %s", what, k)
		}
	}
}

// TestSignerRefusals: a build whose key cannot sign fails with a message that names the
// key and the cause, exits non-zero, and leaves the tree, the manifest and the keys as
// they were.
func TestSignerRefusals(t *testing.T) {
	hsm := softHSM(t)
	kms, k := localKMS(t)
	k.CreateKey(t, "RSA_3072", "alias/other")
	throttled := kmstest.Throttle(t, k.URL, 1000)
	work := t.TempDir()
	projects, published := map[string]string{}, map[string]string{}
	for _, s := range []signer{hsm, kms} {
		dir := filepath.Join(work, s.name)
		out := armor(t, work, s.env, "init", "--dir", dir, "--name", "r"+s.name, "--key", s.uri)
		published[s.name] = fingerprintRE.FindString(out)
		for i, name := range []string{"first", "second"} {
			if _, err := synth.WriteOne(filepath.Join(dir, "debs"), name, "1.0-1", "amd64", ""); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				armor(t, dir, s.env, "build")
			}
		}
		projects[s.name] = dir
	}
	for _, tc := range []struct {
		name, project string
		env           []string
		want          []string
	}{
		{"wrong PIN", "softhsm", replaceEnv(hsm.env, "ARMOR_KEY_PASSPHRASE=9999"),
			[]string{"refused to sign", "object=archive", "CKR_PIN_INCORRECT"}},
		{"KMS unreachable", "awskms", replaceEnv(kms.env, "AWS_ENDPOINT_URL_KMS=http://"+closedAddr(t), "AWS_MAX_ATTEMPTS=2"),
			[]string{"awskms:///alias/archive", "unavailable", "connect"}},
		{"KMS throttling beyond the retries", "awskms", replaceEnv(kms.env, "AWS_ENDPOINT_URL_KMS="+throttled.URL, "AWS_MAX_ATTEMPTS=2"),
			[]string{"awskms:///alias/archive", "unavailable", "ThrottlingException"}},
		{"not the published key", "awskms", append(slices.Clone(kms.env), "ARMOR_SIGNING_KEY=awskms:///alias/other"),
			[]string{"awskms:///alias/other", "not the published key", "$ARMOR_SIGNING_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := projects[tc.project]
			before := snapshot(t, dir)
			out, err := armorErr(dir, tc.env, "build")
			t.Logf("armor build: %v\n%s", err, out)
			if err == nil {
				t.Fatalf("armor build succeeded:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if tc.name == "not the published key" {
				fprs := slices.Compact(fingerprintRE.FindAllString(out, -1))
				if !slices.Contains(fprs, published["awskms"]) || len(fprs) < 2 {
					t.Errorf("the refusal does not name both fingerprints (published %s):\n%s", published["awskms"], out)
				}
			}
			sameSnapshot(t, "a failed build", before, snapshot(t, dir))
		})
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string { return freeAddr(t) }

var fingerprintRE = regexp.MustCompile(`\b[0-9A-F]{40}\b`)

// replaceEnv returns env with the variables of set replacing theirs.
func replaceEnv(env []string, set ...string) []string {
	out := slices.Clone(env)
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		out = append(out, kv)
	}
	return out
}

// TestRotateAcrossSigners: armor key rotate goes from a key file to a KMS key and on to a
// token, and back to a key file, keeping the overlap: while a change is under way every
// release carries a good signature by each key (gpgv reports both), and after --finish by
// the new key alone, which is then the only one in keys/.
func TestRotateAcrossSigners(t *testing.T) {
	kms, _ := localKMS(t)
	hsm := softHSM(t)
	env := append(slices.Clone(kms.env), hsm.env...)
	dir := filepath.Join(t.TempDir(), "repo")
	out := armor(t, filepath.Dir(dir), nil, "init", "--dir", dir, "--name", "rot")
	fileFpr := fingerprintRE.FindString(out)
	n := 0
	build := func(wantSigners ...string) {
		t.Helper()
		n++
		if _, err := synth.WriteOne(filepath.Join(dir, "debs"), fmt.Sprintf("p%d", n), "1.0-1", "amd64", ""); err != nil {
			t.Fatal(err)
		}
		armor(t, dir, env, "build")
		keyring := filepath.Join(dir, "keys", "rot-archive-keyring.gpg")
		in := filepath.Join(dir, "public", "dists", "stable", "InRelease")
		got, _ := exec.Command("gpgv", "--status-fd", "1", "--keyring", keyring, in).Output()
		var valid []string
		for _, m := range regexp.MustCompile(`VALIDSIG ([0-9A-F]{40})`).FindAllStringSubmatch(string(got), -1) {
			valid = append(valid, m[1])
		}
		slices.Sort(valid)
		slices.Sort(wantSigners)
		if !slices.Equal(valid, wantSigners) {
			t.Fatalf("build %d: gpgv found good signatures by %v, want %v:\n%s", n, valid, wantSigners, got)
		}
		ring, _ := exec.Command("gpg", "--show-keys", "--with-colons", keyring).Output()
		if c := strings.Count(string(ring), "\npub:") + strings.Count(string(ring[:min(4, len(ring))]), "pub:"); c != len(wantSigners) {
			t.Errorf("build %d: keys/ holds %d keys, want %d:\n%s", n, c, len(wantSigners), ring)
		}
	}
	rotate := func(args ...string) string {
		t.Helper()
		out := armor(t, dir, env, append([]string{"key", "rotate"}, args...)...)
		return fingerprintRE.FindString(out)
	}
	build(fileFpr)
	kmsFpr := rotate("--to", kms.uri)
	build(fileFpr, kmsFpr)
	rotate("--finish")
	build(kmsFpr)
	hsmFpr := rotate("--to", hsm.uri)
	build(kmsFpr, hsmFpr)
	rotate("--finish")
	build(hsmFpr)
	cfg, _ := os.ReadFile(filepath.Join(dir, "armor.toml"))
	if !strings.Contains(string(cfg), `key = "`+hsm.uri+`"`) || strings.Contains(string(cfg), "next_key") {
		t.Errorf("armor.toml after the change to the token:\n%s", cfg)
	}
	newFile := rotate()
	build(hsmFpr, newFile)
	rotate("--finish")
	build(newFile)
	if _, err := os.Stat(filepath.Join(dir, ".armor", "keys", "next.sec.asc")); err != nil {
		t.Errorf("the new key file: %v", err)
	}
}

// TestInitKeyRefusals: armor init --key refuses a PIN in the flag, a key URI form it cannot
// sign with, and a key it cannot reach, each with a clear error and no armor.toml, keys/
// or key written.
func TestInitKeyRefusals(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		name, key string
		env       []string
		want      string
	}{
		{"pin in the flag", "pkcs11:token=t;object=o?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=1234", nil, "must not hold a secret"},
		{"gcpkms", "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", nil, "not supported"},
		{"not a key URI", "/tmp/key.asc", nil, "is not a key URI"},
		{"KMS unreachable", "awskms:///alias/x", []string{"AWS_ENDPOINT_URL_KMS=http://" + closedAddr(t), "AWS_MAX_ATTEMPTS=1",
			"AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_EC2_METADATA_DISABLED=true"}, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(work, strings.ReplaceAll(tc.name, " ", "-"))
			out, err := armorErr(work, tc.env, "init", "--dir", dir, "--name", "r", "--key", tc.key)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("armor init --key %s: %v, want an error saying %q:\n%s", tc.key, err, tc.want, out)
			}
			if strings.Contains(out, "1234") {
				t.Errorf("the error shows the PIN:\n%s", out)
			}
			if _, err := os.Stat(dir); err == nil {
				entries, _ := os.ReadDir(dir)
				t.Errorf("%s was made, holding %v", dir, entries)
			}
		})
	}
}
