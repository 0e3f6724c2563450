package gen_test

import (
	"bytes"
	"crypto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

// runTool runs a program in dir with a private GNUPGHOME and the C locale, and returns
// its stdout; the error's text includes stderr.
func runTool(t *testing.T, dir, name string, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool(t, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home, "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &toolError{cmd: name + " " + strings.Join(args, " "), err: err, stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

type toolError struct {
	cmd, stderr string
	err         error
}

func (e *toolError) Error() string { return e.cmd + ": " + e.err.Error() + "\n" + e.stderr }

var signCases = []struct {
	name, key string
	hash      crypto.Hash
}{
	{"rsa/sha256", "rsa", crypto.SHA256},
	{"rsa/sha512", "rsa", crypto.SHA512},
	{"eddsa/sha256", "eddsa", crypto.SHA256},
	{"eddsa/sha512", "eddsa", crypto.SHA512},
}

// TestSignatureTools: on a built tree, gpgv verifies InRelease (recovering exactly
// Release) and Release.gpg with Release; sqv verifies Release.gpg with Release. Both keys,
// both digests.
func TestSignatureTools(t *testing.T) {
	for _, tc := range signCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 2, Key: tc.key, Hash: tc.hash})
			r.mustBuild()
			dist := r.tree("dists/stable")
			keyring := filepath.Join(r.Base, "key.gpg")
			writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
			release, err := os.ReadFile(filepath.Join(dist, "Release"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := runTool(t, dist, "gpgv", "--keyring", keyring, "--output", "-", "InRelease")
			if err != nil {
				t.Fatalf("gpgv rejected InRelease: %v", err)
			}
			// gpgv ends the recovered text with a newline of its own.
			if want := append(bytes.Clone(release), '\n'); !bytes.Equal(out, want) {
				t.Errorf("gpgv recovered from InRelease:\n%s\nwhich differs from Release:\n%s", lineDiff(string(want), string(out)), out)
			}
			if _, err := runTool(t, dist, "gpgv", "--keyring", keyring, "Release.gpg", "Release"); err != nil {
				t.Errorf("gpgv rejected Release.gpg: %v", err)
			}
			if _, err := runTool(t, dist, "sqv", "--keyring", keyring, "Release.gpg", "Release"); err != nil {
				t.Errorf("sqv rejected Release.gpg: %v", err)
			}
			// A check that can fail: the same tools refuse a Release altered after signing.
			writeFile(t, filepath.Join(dist, "Release"), bytes.Replace(release, []byte("Codename: stable"), []byte("Codename: stabld"), 1))
			if _, err := runTool(t, dist, "sqv", "--keyring", keyring, "Release.gpg", "Release"); err == nil {
				t.Error("sqv accepted Release.gpg for an altered Release")
			}
			if _, err := runTool(t, dist, "gpgv", "--keyring", keyring, "Release.gpg", "Release"); err == nil {
				t.Error("gpgv accepted Release.gpg for an altered Release")
			}
		})
	}
}

// TestStanzasMatchFtparchive runs `apt-ftparchive packages pool/` in a built tree and
// checks that every stanza of armor's Packages has exactly apt-ftparchive's fields and
// values (field order aside: armor keeps the control file's order). SHA512 is turned off
// in apt-ftparchive, as armor does not list it. The inputs are the real debs, synthetic
// ones, and synthetic ones whose control.tar is xz, zstd or uncompressed.
func TestStanzasMatchFtparchive(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 6, Archs: []string{"amd64"}})
	for _, comp := range []string{"xz", "zst", "none"} {
		name := "ctl-" + comp
		control := "Package: " + name + "\nVersion: 1:2.0~rc1-3\nArchitecture: amd64\n" +
			"Maintainer: Armor Test <t@example.invalid>\nInstalled-Size: 1\n" +
			"Pre-Depends: pkg000000\nRecommends: natpmpc | pkg000001\nSection: misc\nPriority: optional\n" +
			"Multi-Arch: foreign\nX-Custom-Field: kept as is\n" +
			"Description: control.tar." + comp + "\n first line\n .\n  preformatted line\n"
		var b bytes.Buffer
		if err := synth.Encode(&b, synth.Deb{Control: []byte(control), Compression: comp,
			Files: []synth.File{{Path: "usr/share/doc/" + name + "/README", Data: []byte("hi\n")}}}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.in("custom/"+name+".deb"), b.Bytes())
	}
	r.mustBuild()

	out, err := runTool(t, r.Opts.TreeDir, "apt-ftparchive", "-o", "APT::FTPArchive::SHA512=false", "packages", "pool/")
	if err != nil {
		t.Fatal(err)
	}
	want := byPackage(t, out)
	got := byPackage(t, packagesFile(t, r, "amd64"))
	if len(want) != 13 {
		t.Fatalf("apt-ftparchive listed %d packages, want 13", len(want))
	}
	if !equalKeys(got, want) {
		t.Fatalf("armor lists %v, apt-ftparchive %v", sortedKeys(got), sortedKeys(want))
	}
	for _, name := range sortedKeys(want) {
		g, w := got[name], want[name]
		for _, f := range sortedKeys(w) {
			if gv, ok := g[f]; !ok {
				t.Errorf("%s: armor has no field %s (apt-ftparchive: %q)", name, f, w[f])
			} else if gv != w[f] {
				t.Errorf("%s: field %s: armor %q, apt-ftparchive %q", name, f, gv, w[f])
			}
		}
		for _, f := range sortedKeys(g) {
			if _, ok := w[f]; !ok {
				t.Errorf("%s: armor has field %s, which apt-ftparchive does not write", name, f)
			}
		}
	}
}

func byPackage(t *testing.T, data []byte) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, st := range stanzas(t, data) {
		if _, dup := out[st["Package"]]; dup {
			t.Fatalf("package %s listed twice", st["Package"])
		}
		out[st["Package"]] = st
	}
	return out
}

func equalKeys[V any](a, b map[string]V) bool {
	return slices.Equal(sortedKeys(a), sortedKeys(b))
}
