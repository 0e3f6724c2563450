package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signingEnv is every variable SigningKey and Passphrase may read.
var signingEnv = []string{EnvSigningKey, EnvSigningKeyFile, EnvPassphrase, EnvPassphraseFile, "MY_PASS"}

// signingFixture writes the files the precedence tests read and returns their directory
// and armor.toml variants by name: "key" names signing.key, "nokey" leaves it out,
// "passfile" and "passenv" add passphrase_file and passphrase_env.
func signingFixture(t *testing.T) (string, map[string]*File) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"key.asc":     "KEY FROM signing.key",
		"envkey.asc":  "KEY FROM ARMOR_SIGNING_KEY_FILE",
		"pass.txt":    "pass from passphrase_file\n",
		"envpass.txt": "pass from ARMOR_KEY_PASSPHRASE_FILE\r\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keyLine := `key = ".armor/keys/signing.sec.asc"`
	variants := map[string]string{
		"key":      edit(t, keyLine, `key = "key.asc"`),
		"nokey":    edit(t, keyLine, ""),
		"missing":  edit(t, keyLine, `key = "gone.asc"`),
		"passfile": edit(t, keyLine, "key = \"key.asc\"\npassphrase_file = \"pass.txt\""),
		"passenv":  edit(t, keyLine, "key = \"key.asc\"\npassphrase_env = \"MY_PASS\""),
		"badpass":  edit(t, keyLine, "key = \"key.asc\"\npassphrase_file = \"gone.txt\""),
	}
	files := map[string]*File{"none": nil}
	for name, data := range variants {
		f, err := Parse([]byte(data), filepath.Join(dir, "armor.toml"))
		if err != nil {
			t.Fatalf("armor.toml variant %s: %v", name, err)
		}
		files[name] = f
	}
	return dir, files
}

// setSigningEnv clears every signing variable, then sets env (DIR in a value stands for dir).
func setSigningEnv(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	for _, v := range signingEnv {
		t.Setenv(v, "")
	}
	for k, v := range env {
		t.Setenv(k, strings.ReplaceAll(v, "DIR", dir))
	}
}

func TestSigningKeyPrecedence(t *testing.T) {
	dir, files := signingFixture(t)
	cases := []struct {
		name     string
		cfg      string // variant of armor.toml, "none" for no armor.toml
		env      map[string]string
		want     string   // the key's bytes
		wantFrom []string // substrings of From
		wantErr  []string // substrings of the error; none means no error
	}{
		{name: "signing.key alone", cfg: "key",
			want: "KEY FROM signing.key", wantFrom: []string{"signing.key", filepath.Join(dir, "key.asc")}},
		{name: "ARMOR_SIGNING_KEY wins over signing.key", cfg: "key",
			env:  map[string]string{EnvSigningKey: "KEY FROM ARMOR_SIGNING_KEY"},
			want: "KEY FROM ARMOR_SIGNING_KEY", wantFrom: []string{"$ARMOR_SIGNING_KEY"}},
		{name: "ARMOR_SIGNING_KEY_FILE wins over signing.key", cfg: "key",
			env:  map[string]string{EnvSigningKeyFile: "DIR/envkey.asc"},
			want: "KEY FROM ARMOR_SIGNING_KEY_FILE", wantFrom: []string{"$ARMOR_SIGNING_KEY_FILE", filepath.Join(dir, "envkey.asc")}},
		{name: "the environment without signing.key", cfg: "nokey",
			env:  map[string]string{EnvSigningKey: "KEY FROM ARMOR_SIGNING_KEY"},
			want: "KEY FROM ARMOR_SIGNING_KEY", wantFrom: []string{"$ARMOR_SIGNING_KEY"}},
		{name: "the environment without armor.toml", cfg: "none",
			env:  map[string]string{EnvSigningKeyFile: "DIR/envkey.asc"},
			want: "KEY FROM ARMOR_SIGNING_KEY_FILE", wantFrom: []string{"$ARMOR_SIGNING_KEY_FILE"}},
		{name: "an empty variable counts as unset", cfg: "key",
			env:  map[string]string{EnvSigningKey: ""},
			want: "KEY FROM signing.key", wantFrom: []string{"signing.key"}},
		{name: "both variables", cfg: "key",
			env:     map[string]string{EnvSigningKey: "k", EnvSigningKeyFile: "DIR/envkey.asc"},
			wantErr: []string{"$ARMOR_SIGNING_KEY and $ARMOR_SIGNING_KEY_FILE", "only one"}},
		{name: "no key anywhere", cfg: "nokey",
			wantErr: []string{"no signing key", "$ARMOR_SIGNING_KEY ", "$ARMOR_SIGNING_KEY_FILE", "signing.key in " + filepath.Join(dir, "armor.toml")}},
		{name: "no key and no armor.toml", cfg: "none",
			wantErr: []string{"no signing key", "$ARMOR_SIGNING_KEY ", "$ARMOR_SIGNING_KEY_FILE", "signing.key in armor.toml"}},
		{name: "signing.key names a missing file", cfg: "missing",
			wantErr: []string{filepath.Join(dir, "gone.asc"), "signing.key", "does not exist", "armor key generate", "$ARMOR_SIGNING_KEY"}},
		{name: "ARMOR_SIGNING_KEY_FILE names a missing file", cfg: "key",
			env:     map[string]string{EnvSigningKeyFile: "DIR/gone.asc"},
			wantErr: []string{"$ARMOR_SIGNING_KEY_FILE", "no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setSigningEnv(t, dir, c.env)
			s, err := SigningKey(files[c.cfg])
			checkSecret(t, s, err, c.want, c.wantFrom, c.wantErr)
		})
	}
}

func TestPassphrasePrecedence(t *testing.T) {
	dir, files := signingFixture(t)
	cases := []struct {
		name     string
		cfg      string
		env      map[string]string
		want     string
		wantFrom []string // none: no passphrase, From empty
		wantErr  []string
	}{
		{name: "none", cfg: "key"},
		{name: "none without armor.toml", cfg: "none"},
		{name: "ARMOR_KEY_PASSPHRASE", cfg: "key",
			env:  map[string]string{EnvPassphrase: "pass from env"},
			want: "pass from env", wantFrom: []string{"$ARMOR_KEY_PASSPHRASE"}},
		{name: "ARMOR_KEY_PASSPHRASE_FILE, line break trimmed", cfg: "none",
			env:  map[string]string{EnvPassphraseFile: "DIR/envpass.txt"},
			want: "pass from ARMOR_KEY_PASSPHRASE_FILE", wantFrom: []string{"$ARMOR_KEY_PASSPHRASE_FILE", filepath.Join(dir, "envpass.txt")}},
		{name: "ARMOR_KEY_PASSPHRASE wins over passphrase_file", cfg: "passfile",
			env:  map[string]string{EnvPassphrase: "pass from env"},
			want: "pass from env", wantFrom: []string{"$ARMOR_KEY_PASSPHRASE"}},
		{name: "ARMOR_KEY_PASSPHRASE_FILE wins over passphrase_env", cfg: "passenv",
			env:  map[string]string{EnvPassphraseFile: "DIR/envpass.txt", "MY_PASS": "pass from MY_PASS"},
			want: "pass from ARMOR_KEY_PASSPHRASE_FILE", wantFrom: []string{"$ARMOR_KEY_PASSPHRASE_FILE"}},
		{name: "passphrase_file", cfg: "passfile",
			want: "pass from passphrase_file", wantFrom: []string{"signing.passphrase_file", filepath.Join(dir, "pass.txt")}},
		{name: "passphrase_env", cfg: "passenv",
			env:  map[string]string{"MY_PASS": "pass from MY_PASS"},
			want: "pass from MY_PASS", wantFrom: []string{"$MY_PASS", "signing.passphrase_env"}},
		{name: "passphrase_env names an unset variable", cfg: "passenv"},
		{name: "both variables", cfg: "key",
			env:     map[string]string{EnvPassphrase: "p", EnvPassphraseFile: "DIR/envpass.txt"},
			wantErr: []string{"$ARMOR_KEY_PASSPHRASE and $ARMOR_KEY_PASSPHRASE_FILE", "only one"}},
		{name: "ARMOR_KEY_PASSPHRASE_FILE names a missing file", cfg: "key",
			env:     map[string]string{EnvPassphraseFile: "DIR/gone.txt"},
			wantErr: []string{"$ARMOR_KEY_PASSPHRASE_FILE", "no such file"}},
		{name: "passphrase_file names a missing file", cfg: "badpass",
			wantErr: []string{"signing.passphrase_file", filepath.Join(dir, "gone.txt")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setSigningEnv(t, dir, c.env)
			s, err := Passphrase(files[c.cfg])
			checkSecret(t, s, err, c.want, c.wantFrom, c.wantErr)
		})
	}
}

// checkSecret compares what SigningKey or Passphrase returned with a case's wants.
func checkSecret(t *testing.T, s Secret, err error, want string, wantFrom, wantErr []string) {
	t.Helper()
	if len(wantErr) > 0 {
		if err == nil {
			t.Fatalf("got %q from %q, want an error with %q", s.Data, s.From, wantErr)
		}
		for _, w := range wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if string(s.Data) != want {
		t.Errorf("got %q, want %q", s.Data, want)
	}
	if len(wantFrom) == 0 && s.From != "" {
		t.Errorf("From = %q, want none", s.From)
	}
	for _, w := range wantFrom {
		if !strings.Contains(s.From, w) {
			t.Errorf("From = %q, lacks %q", s.From, w)
		}
	}
}

func TestPublishedKeyrings(t *testing.T) {
	dir, files := signingFixture(t)
	f := files["key"]
	if got := f.PublishedKeyrings(); len(got) != 0 {
		t.Errorf("without keys/: %v", got)
	}
	base := PublicKeyBase(dir, "acme")
	if want := filepath.Join(dir, "keys", "acme-archive-keyring"); base != want {
		t.Errorf("PublicKeyBase = %q, want %q", base, want)
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".gpg", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.PublishedKeyrings(); len(got) != 1 || got[0] != base+".gpg" {
		t.Errorf("with keys/acme-archive-keyring.gpg: %v", got)
	}
	if err := os.WriteFile(base+".asc", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.PublishedKeyrings(); len(got) != 2 || got[0] != base+".asc" {
		t.Errorf("with .asc and .gpg: %v", got)
	}
}

// TestSecretNotEchoed: a *_FILE variable that holds the secret itself instead of a path
// fails without repeating its value, which a CI log would then show.
func TestSecretNotEchoed(t *testing.T) {
	const secret = "hunter2-not-a-path"
	for _, pair := range [][2]string{{EnvSigningKey, EnvSigningKeyFile}, {EnvPassphrase, EnvPassphraseFile}} {
		t.Setenv(pair[0], "")
		t.Setenv(pair[1], secret)
		_, _, err := fromEnv(pair[0], pair[1])
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "$"+pair[1]) {
			t.Errorf("$%s holding a secret: error %v; want one naming the variable and not its value", pair[1], err)
		}
	}
}

// TestSigningKeyURI: a key URI in $ARMOR_SIGNING_KEY or signing.key names a key held
// elsewhere (it is not read as a file or as key data), with the same precedence.
func TestSigningKeyURI(t *testing.T) {
	dir := t.TempDir()
	f := &File{Path: filepath.Join(dir, "armor.toml"), Signing: Signing{Key: "awskms:///alias/a", NextKey: "gpg-agent:46B67D6D4CA63BE43550B392875011482ECCA006"}}
	t.Setenv(EnvSigningKey, "")
	t.Setenv(EnvSigningKeyFile, "")
	t.Setenv(EnvNextSigningKey, "")
	t.Setenv(EnvNextSigningKeyFile, "")
	s, err := SigningKey(f)
	if err != nil || s.URI != "awskms:///alias/a" || s.Data != nil || !strings.Contains(s.From, "signing.key") {
		t.Errorf("signing.key URI: %+v, %v", s, err)
	}
	n, ok, err := NextSigningKey(f)
	if err != nil || !ok || n.URI != f.Signing.NextKey {
		t.Errorf("signing.next_key URI: %+v, %v, %v", n, ok, err)
	}
	t.Setenv(EnvSigningKey, " pkcs11:token=t;object=o?module-path=/m.so\n")
	s, err = SigningKey(f)
	if err != nil || s.URI != "pkcs11:token=t;object=o?module-path=/m.so" || s.From != "$"+EnvSigningKey {
		t.Errorf("$ARMOR_SIGNING_KEY URI: %+v, %v", s, err)
	}
}

// TestSigningKeyURIInFile: a file that $ARMOR_SIGNING_KEY_FILE names may hold a key URI.
func TestSigningKeyURIInFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	os.WriteFile(p, []byte("pkcs11:token=t;object=o?module-path=/m.so&pin-value=1\n"), 0o600)
	t.Setenv(EnvSigningKey, "")
	t.Setenv(EnvSigningKeyFile, p)
	s, err := SigningKey(nil)
	if err != nil || s.URI != "pkcs11:token=t;object=o?module-path=/m.so&pin-value=1" || !strings.Contains(s.From, p) {
		t.Errorf("got %+v, %v", s, err)
	}
}
