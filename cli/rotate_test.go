package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestKeyRotate: during a change of keys every build signs with both keys, and real apt
// accepts the repository with the old keyring alone and with the new one alone; after
// --finish the new key signs alone, and the old keyring no longer verifies it.
func TestKeyRotate(t *testing.T) {
	dir, cfg := initAcme(t)
	armorOK(t, "-c", cfg, "build")
	oldRing := filepath.Join(t.TempDir(), "old.gpg")
	copyFileT(t, filepath.Join(dir, "keys", "acme-archive-keyring.gpg"), oldRing)

	out := armorOK(t, "-c", cfg, "key", "rotate", "--algo", "eddsa")
	if !strings.Contains(out, "builds now sign with both") {
		t.Fatalf("key rotate: %s", out)
	}
	armorFails(t, 1, []string{"a change of keys is under way"}, "-c", cfg, "key", "rotate")
	if data, _ := os.ReadFile(cfg); !strings.Contains(string(data), `next_key = ".armor/keys/next.sec.asc"`) {
		t.Fatalf("armor.toml lacks next_key:\n%s", data)
	}
	newRing := filepath.Join(dir, ".armor", "keys", "next.pub.gpg")
	if _, err := synth.WriteOne(filepath.Join(dir, "debs"), "hello", "1.1-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	armorOK(t, "-c", cfg, "build")
	inRelease := readFileT(t, filepath.Join(dir, "public", "dists", "stable", "InRelease"))
	if n := strings.Count(string(inRelease), "-----BEGIN PGP SIGNATURE-----"); n != 1 {
		t.Fatalf("InRelease has %d signature blocks", n)
	}
	release := string(readFileT(t, filepath.Join(dir, "public", "dists", "stable", "Release")))
	if line := grepLine(release, "Signed-By:"); strings.Count(line, ",") != 1 {
		t.Errorf("Release's Signed-By names %q, want both keys", line)
	}
	aptWith := func(keyring string) *apttest.Apt {
		return apttest.New(t, apttest.Options{Sources: []apttest.Source{{
			URI: "file:" + filepath.Join(dir, "public"), Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: keyring,
		}}})
	}
	for _, ring := range []string{oldRing, newRing} {
		a := aptWith(ring)
		a.Update(t)
		if v := a.Policy(t, "hello"); v != "1.1-1" {
			t.Errorf("with %s alone apt's candidate is %q, want 1.1-1", filepath.Base(ring), v)
		}
	}

	out = armorOK(t, "-c", cfg, "key", "rotate", "--finish")
	if !strings.Contains(out, "now signs alone") {
		t.Fatalf("key rotate --finish: %s", out)
	}
	if data, _ := os.ReadFile(cfg); strings.Contains(string(data), "next_key") {
		t.Fatalf("armor.toml still names next_key:\n%s", data)
	}
	armorOK(t, "-c", cfg, "build")
	aptWith(newRing).Update(t)
	if out, _ := aptWith(oldRing).Cmd("update").CombinedOutput(); !strings.Contains(string(out), "NO_PUBKEY") && !strings.Contains(string(out), "not signed") {
		t.Errorf("after --finish apt with the old keyring alone did not refuse the repository:\n%s", out)
	}
}

func grepLine(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func copyFileT(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKeyRotateImportAndLeftoverSecret: armor key rotate --import takes a key made ahead
// of time; after --finish, a runner whose $ARMOR_NEXT_SIGNING_KEY was left set signs once
// with the new key when $ARMOR_SIGNING_KEY holds it too (a warning says to delete the
// secret), and is refused, naming both secrets, when $ARMOR_SIGNING_KEY still holds the
// old key.
func TestKeyRotateImportAndLeftoverSecret(t *testing.T) {
	dir, cfg := initAcme(t)
	oldKey := string(readFileT(t, filepath.Join(dir, ".armor", "keys", "signing.sec.asc")))
	armorFails(t, 1, []string{"--to and --import"}, "-c", cfg, "key", "rotate", "--import", eddsaKey, "--to", "gpg-agent:0123")
	out := armorOK(t, "-c", cfg, "key", "rotate", "--import", eddsaKey)
	const newFpr = "46B67D6D4CA63BE43550B392875011482ECCA006"
	if !strings.Contains(out, "new key "+newFpr) {
		t.Fatalf("key rotate --import: %s", out)
	}
	armorOK(t, "-c", cfg, "build")
	release := string(readFileT(t, filepath.Join(dir, "public", "dists", "stable", "Release")))
	if line := grepLine(release, "Signed-By:"); !strings.Contains(line, newFpr) || strings.Count(line, ",") != 1 {
		t.Errorf("during the change Release's Signed-By is %q, want both keys", line)
	}
	armorOK(t, "-c", cfg, "key", "rotate", "--finish")
	newKey := string(readFileT(t, filepath.Join(dir, ".armor", "keys", "signing.sec.asc")))
	if newKey == oldKey {
		t.Fatal("--finish left the old key in signing.key's file")
	}

	// The runner: the keys come from the environment only.
	data := strings.Replace(string(readFileT(t, cfg)), `key = ".armor/keys/signing.sec.asc"`, "", 1)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ARMOR_NEXT_SIGNING_KEY", newKey)
	t.Setenv("ARMOR_SIGNING_KEY", oldKey)
	if _, err := synth.WriteOne(filepath.Join(dir, "debs"), "hello", "1.1-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	armorFails(t, 1, []string{"$ARMOR_NEXT_SIGNING_KEY holds key " + newFpr, "no change of keys is under way",
		"put it in $ARMOR_SIGNING_KEY and delete $ARMOR_NEXT_SIGNING_KEY"}, "-c", cfg, "build")

	t.Setenv("ARMOR_SIGNING_KEY", newKey)
	r := armor(t, "-c", cfg, "build")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: $ARMOR_NEXT_SIGNING_KEY holds the signing key "+newFpr) ||
		!strings.Contains(r.stderr, "delete $ARMOR_NEXT_SIGNING_KEY") {
		t.Fatalf("build with the leftover secret: %s", r)
	}
	inRelease := string(readFileT(t, filepath.Join(dir, "public", "dists", "stable", "InRelease")))
	release = string(readFileT(t, filepath.Join(dir, "public", "dists", "stable", "Release")))
	if line := grepLine(release, "Signed-By:"); line != "Signed-By: "+newFpr {
		t.Errorf("after --finish Release's Signed-By is %q, want the new key alone", line)
	}
	if n := strings.Count(inRelease, "-----BEGIN PGP SIGNATURE-----"); n != 1 {
		t.Errorf("InRelease has %d signature blocks", n)
	}
	a := apttest.New(t, apttest.Options{Sources: []apttest.Source{{
		URI: "file:" + filepath.Join(dir, "public"), Suites: []string{"stable"}, Components: []string{"main"},
		SignedBy: abs(t, eddsaKeyring),
	}}})
	a.Update(t)
	if v := a.Policy(t, "hello"); v != "1.1-1" {
		t.Errorf("apt with the new key alone: candidate %q, want 1.1-1", v)
	}
}
