package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstall: the package dpkg-deb reads installs with dpkg -i into a throwaway root:
// the binary runs from /usr/bin, the units name it there, the configurations are
// registered as conffiles, and postinst made the armor system user in that root.
func TestInstall(t *testing.T) {
	bin := os.Getenv("ARMOR_BIN")
	if bin == "" {
		var err error
		bin, err = filepath.Abs(filepath.Join("..", "..", "bin", "armor"))
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no armor binary to package (make build writes bin/armor): %v", err)
	}
	out := t.TempDir()
	pkg, err := build(bin, filepath.Join("..", "..", "configs"), "1.2.3-1", "amd64", out, time.Unix(1767225600, 0))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := exec.Command("dpkg-deb", "--field", pkg, "Package", "Version").CombinedOutput(); err != nil || string(info) != "Package: armor\nVersion: 1.2.3-1\n" {
		t.Fatalf("dpkg-deb --field: %v\n%s", err, info)
	}

	// A root with what dpkg and useradd need: its database, and the system's users.
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"passwd", "group", "shadow", "gshadow", "login.defs"} {
		if data, err := os.ReadFile(filepath.Join("/etc", f)); err == nil {
			data = []byte(strings.ReplaceAll(string(data), "\narmor:", "\nxarmor:"))
			if err := os.WriteFile(filepath.Join(root, "etc", f), data, 0o640); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("dpkg", "--root="+root, "--force-script-chrootless", "--force-depends", "--log=/dev/null", "-i", pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i into %s: %v\n%s", root, err, out)
	}
	ver, err := exec.Command(filepath.Join(root, "usr", "bin", "armor"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(ver), "armor") {
		t.Errorf("the installed armor version: %v\n%s", err, ver)
	}
	unit, err := os.ReadFile(filepath.Join(root, "lib", "systemd", "system", "armor-controld.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart=/usr/bin/armor controld") {
		t.Errorf("installed controld unit: %v\n%s", err, unit)
	}
	if ex, err := os.ReadFile(filepath.Join(root, "usr/share/doc/armor/examples/deploy/controld.toml")); err != nil || !strings.Contains(string(ex), "postgres://") {
		t.Errorf("installed deployment example: %v\n%s", err, ex)
	}
	status, err := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var", "lib", "dpkg"), "-s", "armor").CombinedOutput()
	if err != nil || !strings.Contains(string(status), "Status: install ok installed") || !strings.Contains(string(status), "/etc/armor/controld.toml") {
		t.Errorf("dpkg-query -s armor: %v\n%s", err, status)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if !strings.Contains(string(passwd), "\narmor:") || !strings.Contains(string(passwd), ":/var/lib/armor:/usr/sbin/nologin") {
		t.Errorf("postinst made no armor system user in the root:\n%s", passwd)
	}
}
