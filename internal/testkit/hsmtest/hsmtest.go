// Package hsmtest makes a real PKCS#11 token for tests: a SoftHSM2 token in a temporary
// directory, with RSA keys generated on it by pkcs11-tool (OpenSC). .ci/install-deps
// installs softhsm2 and opensc.
package hsmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Module is where Debian's softhsm2 package puts the PKCS#11 module.
const Module = "/usr/lib/softhsm/libsofthsm2.so"

// Token is a SoftHSM2 token.
type Token struct {
	Conf  string // the SOFTHSM2_CONF file that points at its directory
	Label string
	PIN   string
}

// New initialises a token labelled label with user PIN pin. Its configuration is set in
// the test's environment (SOFTHSM2_CONF) and given in Env for other processes.
func New(t testing.TB, label, pin string) *Token {
	t.Helper()
	for _, tool := range []string{"softhsm2-util", "pkcs11-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run .ci/install-deps (apt-get install softhsm2 opensc)", tool)
		}
	}
	if _, err := os.Stat(Module); err != nil {
		t.Fatalf("the SoftHSM2 module %s is missing: run .ci/install-deps (apt-get install softhsm2)", Module)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n", tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := &Token{Conf: conf, Label: label, PIN: pin}
	t.Setenv("SOFTHSM2_CONF", conf)
	tok.run(t, "softhsm2-util", "--init-token", "--free", "--label", label, "--pin", pin, "--so-pin", pin+"-so")
	return tok
}

// Env is the environment in which a process finds the token.
func (tok *Token) Env() []string { return []string{"SOFTHSM2_CONF=" + tok.Conf} }

// GenerateRSA makes an RSA key pair of bits on the token, labelled object with CKA_ID id.
func (tok *Token) GenerateRSA(t testing.TB, bits int, object, id string) {
	t.Helper()
	tok.run(t, "pkcs11-tool", "--module", Module, "--token-label", tok.Label, "--login", "--pin", tok.PIN,
		"--keypairgen", "--key-type", fmt.Sprintf("rsa:%d", bits), "--label", object, "--id", id, "--usage-sign")
}

// URI is the pkcs11: URI of the key labelled object, without a PIN.
func (tok *Token) URI(object string) string {
	return fmt.Sprintf("pkcs11:token=%s;object=%s?module-path=%s", tok.Label, object, Module)
}

func (tok *Token) run(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), tok.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
