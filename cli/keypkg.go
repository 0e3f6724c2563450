package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/debian/aptsources"
	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// KeyPackageCmd builds the repository's keyring package.
type KeyPackageCmd struct {
	Version string `name:"package-version" help:"Package version (default: the build date, YYYY.MM.DD, from SOURCE_DATE_EPOCH or now)."`
	Out     string `help:"Directory to write the .deb into: one the inputs name, such as debs, publishes it with the next armor build." default:"debs" type:"path"`
	URI     string `help:"Repository URI in the .sources file (default: http://<first hostname>/, https with [repository] https = true)."`
}

// Help says what the package holds.
func (c *KeyPackageCmd) Help() string {
	return `Writes <name>-archive-keyring_<version>_all.deb, as Debian's own keyring packages are made: the published keyring (keys/<name>-archive-keyring.gpg, every key it holds) as /usr/share/keyrings/<name>-archive-keyring.gpg, and /etc/apt/sources.list.d/<name>.sources (a conffile) naming the repository with Signed-By that keyring. Users who install it get new keys with their upgrades, so a key rotation reaches them through apt itself.`
}

// Run builds the package.
func (c *KeyPackageCmd) Run(g *Globals) error {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	name := cfg.Repository.Name
	keyring, err := os.ReadFile(config.PublicKeyBase(cfg.Dir(), name) + ".gpg")
	if err != nil {
		return fmt.Errorf("the published keyring: %w (armor key export --out %s writes it)", err, config.PublicKeyBase(cfg.Dir(), name))
	}
	keys, err := sign.ReadKeyring(keyring)
	if err != nil {
		return fmt.Errorf("the published keyring: %w", err)
	}
	date, err := buildDate(nil, cfg.Date)
	if err != nil {
		return err
	}
	version := c.Version
	if version == "" {
		version = date.Format("2006.01.02")
	}
	uri := c.URI
	if uri == "" {
		if len(cfg.Repository.Hostnames) == 0 {
			return fmt.Errorf("%s names no hostname for the .sources file: give --uri", cfg.Path)
		}
		uri = aptsources.URI(cfg.Repository.Hostnames[0], cfg.Repository.HTTPS)
	}
	data, err := keyringPackage(cfg, name, version, uri, keyring, len(keys), date)
	if err != nil {
		return err
	}
	out := filepath.Join(c.Out, fmt.Sprintf("%s-archive-keyring_%s_all.deb", name, version))
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"package": out, "version": version, "keys": len(keys)})
	}
	fmt.Fprintf(g.stdout, "wrote %s (%d key(s), %s)\n", out, len(keys), humanBytes(int64(len(data))))
	return nil
}

// keyringPackage returns the .deb of the repository's keyring and sources file.
func keyringPackage(cfg *config.File, name, version, uri string, keyring []byte, nkeys int, date time.Time) ([]byte, error) {
	keyPath := aptsources.KeyringPath(name)
	sources := aptsources.Entry(uri, keyPath, sourcesSuites(cfg))
	maint := cfg.Repository.Origin
	if maint == "" {
		maint = name
	}
	control := fmt.Sprintf(`Package: %s-archive-keyring
Version: %s
Architecture: all
Maintainer: %s <root@%s>
Multi-Arch: foreign
Section: misc
Priority: optional
Description: OpenPGP archive keys of the %s APT repository
 The %d key(s) that sign the %s repository, and an APT sources file
 that names the repository and trusts only these keys for it.
`, name, version, maint, hostOr(cfg), name, nkeys, name)
	return deb.Write(control, []deb.File{
		{Path: keyPath, Data: keyring},
		{Path: aptsources.Path(name), Data: []byte(sources), Conffile: true},
	}, date)
}

// sourcesSuites are the suites of the .sources entry, as the repository page names them
// (each by its codename, components sorted, in name order), so that the package's file
// is byte for byte the one a user who followed the page wrote: dpkg then installs the
// conffile without a prompt. deb-src is named where the local manifest publishes source
// packages in every component of the suite.
func sourcesSuites(cfg *config.File) []aptsources.Suite {
	src := map[string]map[string]bool{} // suite → components with source packages
	if m, err := manifest.Load(cfg.Resolve(cfg.Output.Manifest)); err == nil {
		for _, p := range m.Packages {
			if p.Architecture == "source" {
				if src[p.Suite] == nil {
					src[p.Suite] = map[string]bool{}
				}
				src[p.Suite][p.Component] = true
			}
		}
	}
	var out []aptsources.Suite
	for _, s := range cfg.Suites {
		comps := slices.Sorted(slices.Values(s.Components))
		out = append(out, aptsources.Suite{Name: s.Codename, Components: comps, Source: len(src[s.Codename]) == len(comps)})
	}
	slices.SortFunc(out, func(a, b aptsources.Suite) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func hostOr(cfg *config.File) string {
	if len(cfg.Repository.Hostnames) > 0 {
		return cfg.Repository.Hostnames[0]
	}
	return "localhost"
}
