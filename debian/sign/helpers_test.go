package sign

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	keysDir             = "../../testdata/keys"
	protectedPassphrase = "armor-test-passphrase" // also in testdata/keys/README.md
)

// readFixture returns the bytes of testdata/keys/name.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(keysDir, name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

// fixtureKey reads the secret fixture key "name" (rsa, eddsa or protected).
func fixtureKey(t testing.TB, name string) *Key {
	t.Helper()
	var pass []byte
	if name == "protected" {
		pass = []byte(protectedPassphrase)
	}
	k, err := ReadSecretKey(bytes.NewReader(readFixture(t, name+".sec.asc")), pass)
	if err != nil {
		t.Fatalf("read fixture key %s: %v", name, err)
	}
	return k
}

// tool returns the path of an installed program or fails the test.
func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps (%v)", name, err)
	}
	return p
}

// run runs a program with GNUPGHOME set to home and returns its stdout and error
// (whose text includes stderr).
func run(t testing.TB, home string, stdin []byte, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home, "LC_ALL=C")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
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

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// gnupgHome returns a fresh private GNUPGHOME.
func gnupgHome(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

// publicKeyring returns k's binary public keyring.
func publicKeyring(t testing.TB, k *Key) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := k.WritePublicKeyring(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sampleRelease is a Release file shaped like the ones gen writes.
const sampleRelease = `Origin: armor test
Label: armor test
Suite: stable
Codename: stable
Date: Sun, 22 Nov 2026 07:00:00 UTC
Architectures: amd64 arm64
Components: main
Acquire-By-Hash: yes
SHA256:
 0f3c3f1d2f8a1d3e9d6c0b6b2fa1c9f6a55e3f0f7c1e6c7b5d1a8e4f9b2c3d4e   1234 main/binary-amd64/Packages
 7d8e3f1d2f8a1d3e9d6c0b6b2fa1c9f6a55e3f0f7c1e6c7b5d1a8e4f9b2c3d4e    567 main/binary-amd64/Packages.gz
`
