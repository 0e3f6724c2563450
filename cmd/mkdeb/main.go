// Command mkdeb packages armor as a Debian binary package, the way its users' servers
// install software: /usr/bin/armor, the systemd units of controld and edged, their
// configuration files under /etc/armor (conffiles), and a postinst that makes the armor
// system user. make deb runs it on the binary make build-all writes (every rclone
// backend). The package is written with debian/deb, armor's own writer, so that the same
// code that publishes keyring packages makes armor's.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/internal/atomicfile"
)

func main() {
	binary := flag.String("binary", "bin/armor", "the armor binary to package")
	configs := flag.String("configs", "configs", "the directory of the systemd units and example configurations")
	version := flag.String("version", "", "package version (required)")
	arch := flag.String("arch", "amd64", "Debian architecture of the binary")
	out := flag.String("out", "bin", "directory to write the .deb into")
	flag.Parse()
	path, err := build(*binary, *configs, *version, *arch, *out, time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// postinst makes the armor system user (in the root dpkg installs into: DPKG_ROOT) and
// has systemd read the units again.
const postinst = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
	root="${DPKG_ROOT:-}"
	if ! grep -q '^armor:' "$root/etc/passwd" 2>/dev/null; then
		useradd ${root:+--root "$root"} --system --user-group --home-dir /var/lib/armor --no-create-home --shell /usr/sbin/nologin armor
	fi
	if [ -z "$root" ] && [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
	fi
fi
`

func build(binary, configs, version, arch, out string, now time.Time) (string, error) {
	if version == "" {
		return "", fmt.Errorf("no -version")
	}
	var err error
	read := func(p string) []byte {
		data, rerr := os.ReadFile(p)
		if rerr != nil && err == nil {
			err = rerr
		}
		return data
	}
	var files []deb.File
	files = append(files, deb.File{Path: "/usr/bin/armor", Data: read(binary), Mode: 0o755})
	for _, unit := range []string{"armor-controld.service", "armor-edged.service"} {
		data := strings.ReplaceAll(string(read(filepath.Join(configs, unit))), "/usr/local/bin/armor", "/usr/bin/armor")
		files = append(files, deb.File{Path: "/lib/systemd/system/" + unit, Data: []byte(data)})
	}
	for _, conf := range []string{"controld.toml", "edged.toml"} {
		files = append(files, deb.File{Path: "/etc/armor/" + conf, Data: read(filepath.Join(configs, conf)), Conffile: true})
	}
	files = append(files, deb.File{Path: "/usr/share/doc/armor/README.md", Data: read(filepath.Join(filepath.Dir(configs), "README.md"))})
	// The multi-node example (two controld replicas on PostgreSQL, N edges) that README's
	// deployment section walks through.
	for _, ex := range []string{"armor.toml", "controld.toml", "edged.toml", "postgres.sql"} {
		files = append(files, deb.File{Path: "/usr/share/doc/armor/examples/deploy/" + ex, Data: read(filepath.Join(configs, "deploy", ex))})
	}
	if err != nil {
		return "", err
	}
	control := fmt.Sprintf(`Package: armor
Version: %s
Architecture: %s
Maintainer: armor developers <armor@localhost>
Section: admin
Priority: optional
Depends: passwd
Description: publish signed Debian (APT) repositories
 armor builds signed APT repositories incrementally, pushes them to an object
 store, records and activates releases in its control daemon (controld) and
 serves them from edges (edged), with systemd units for both daemons.
`, version, arch)
	data, err := deb.Write(control, files, now, deb.File{Path: "/postinst", Data: []byte(postinst)})
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, fmt.Sprintf("armor_%s_%s.deb", version, arch))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return path, atomicfile.WriteFile(path, data, 0o644)
}
