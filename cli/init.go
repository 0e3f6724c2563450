package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/debian/sign/keyuri"
	"github.com/armor-apt/armor/internal/atomicfile"
)

// InitCmd creates armor.toml and a signing key.
type InitCmd struct {
	Dir         string   `help:"Project directory." default:"." type:"path"`
	Name        string   `help:"Repository name (lowercase)." required:""`
	Origin      string   `help:"Release Origin field (default: the name)."`
	Label       string   `help:"Release Label field (default: the origin)."`
	Description string   `help:"Release Description field."`
	Hostname    []string `help:"Hostname the repository is served under (repeatable)."`
	Codename    string   `help:"Suite codename: the directory under dists/." default:"stable"`
	Suite       string   `help:"Suite field (default: the codename)."`
	Component   []string `help:"Component (repeatable)." default:"main"`
	Arch        []string `help:"Architecture (repeatable)." default:"amd64"`
	KeyAlgo     string   `help:"Signing key algorithm: rsa4096, rsa3072 or eddsa." default:"rsa4096" enum:"rsa4096,rsa3072,eddsa"`
	KeyName     string   `help:"User ID name of the signing key (default: \"<origin> archive signing key\")."`
	Key         string   `help:"Sign with a key held elsewhere, named by URI: pkcs11:..., awskms://[ENDPOINT]/KEY, gpg-agent:FINGERPRINT. No key file is made; keys/ gets the key's public half. A token PIN comes from $ARMOR_KEY_PASSPHRASE or pin-source, never from this flag."`
	Store       string   `help:"rclone remote to push to (default: a local directory inside the project)." default:".armor/store"`
	ControldURL string   `name:"controld" help:"controld URL, if you run one."`
	Force       bool     `help:"Overwrite an existing armor.toml and key."`
}

// Run initialises the project.
func (c *InitCmd) Run(g *Globals) error {
	pass, err := passphrase()
	if err != nil {
		return err
	}
	res, err := runInit(c, pass)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, res)
	}
	where := res.SecretKey + " (git ignores .armor/: it never leaves this machine)"
	if c.Key != "" {
		where = res.SecretKey + " (the key stays there: nothing secret is on this machine)"
	}
	fmt.Fprintf(g.stdout, `wrote %s
signing key %s
  secret key: %s
  public key: %s (armored), %s (keyring for /usr/share/keyrings and Signed-By)
git ignores public/ (the tree armor build writes) and debs/ (the inputs; CI builds them):
  commit armor.toml, keys/, .gitignore and, after each build, manifest.toml
put .deb files under %s, then run: armor build && armor push
`, res.Config, res.Fingerprint, where, res.PublicKey, res.Keyring, res.Inputs)
	return nil
}

type initResult struct {
	Config      string `json:"config"`
	Fingerprint string `json:"fingerprint"`
	SecretKey   string `json:"secret_key"`
	PublicKey   string `json:"public_key"`
	Keyring     string `json:"keyring"`
	Inputs      string `json:"inputs"`
}

const armorTOML = `# armor.toml: the repository armor builds. See configs/armor.toml for every option.

[repository]
name = {{q .Name}}
origin = {{q .Origin}}
label = {{q .Label}}
description = {{q .Description}}
# Hostnames the edge serves this repository under.
hostnames = {{list .Hostname}}

[[suite]]
codename = {{q .Codename}}
suite = {{q .Suite}}
components = {{list .Component}}
architectures = {{list .Arch}}
# valid_for = "7d"   # adds Valid-Until; rebuild with --resign before it lapses
# allow_empty = true # a first build may have no .deb in the inputs (else that is an error)
# A release is its parent plus a change: the inputs add packages, and a package leaves
# only through armor remove, keep_versions, or sync.
# keep_versions = 3  # keep only the newest 3 versions of each package (default: all)
# sync = true        # mirror the inputs: a .deb deleted is a package removed
# A build refuses a release in which a package cannot be installed (Depends, Conflicts,
# Breaks...); "warn" publishes it and says which, "off" does not check.
check = "refuse"
# What the packages are installed on, so that their dependencies outside this repository
# are checked too (else they are reported): Packages files, or APT source lines.
# base = ["deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://MIRROR/debian bookworm main"]

[suite.inputs]
{{q (index .Component 0)}} = ["debs/**/*.deb"]

[signing]
# The secret key stays on this machine, or in the HSM, KMS or gpg-agent a key URI names
# (pkcs11:, awskms://, gpg-agent:). Elsewhere, such as a CI runner, hand it over in
# $ARMOR_SIGNING_KEY (the armored key, or a key URI) or $ARMOR_SIGNING_KEY_FILE (a path),
# which win over this line. Its passphrase (a token's PIN), if any, comes from
# $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE (else passphrase_env / passphrase_file here).
key = {{q .KeyRef}}
digest = "SHA512"

[output]
tree = "public"
manifest = "manifest.toml"

[store]
# Any rclone remote: a local directory, "myremote:bucket/prefix" from rclone.conf,
# or use [store.s3] instead (see configs/armor.toml).
remote = {{q .Store}}

[controld]
url = {{q .ControldURL}}
# The token comes from $ARMOR_TOKEN (or token_env / token_file), never from this file.
`

// initTemplate is what armor.toml's template reads.
type initTemplate struct {
	*InitCmd
	KeyRef string // signing.key: the key file's path or the key URI
}

// checkKeyFlag refuses a --key that is no key URI, or that carries a PIN (a flag shows
// in the shell's history and in ps, and armor.toml, where it would go, is committed).
func checkKeyFlag(uri string) error {
	if !sign.IsKeyURI(uri) {
		return fmt.Errorf("--key %q is not a key URI (pkcs11:, awskms://, gpg-agent:): for a key file, run armor init without --key and then armor key import", uri)
	}
	if keyuri.HasSecret(uri) {
		return fmt.Errorf("--key %s carries pin-value: a flag must not hold a secret; use pin-source=FILE in the URI, or $ARMOR_KEY_PASSPHRASE", keyuri.Redact(uri))
	}
	return nil
}

// remoteKey opens the key a URI names and makes its OpenPGP public key: the one gpg
// already has for a gpg-agent key, else a new certificate with the user ID name, created
// now and self-signed through the key.
func remoteKey(ctx context.Context, uri, name string, pin []byte) (*sign.Key, error) {
	s, err := keyuri.Open(ctx, uri, pin)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	if cert := keyuri.Certificate(s); cert != nil {
		return sign.NewKey(s, uri, cert)
	}
	return sign.Certify(ctx, s, uri, name, time.Now())
}

func runInit(c *InitCmd, pass []byte) (*initResult, error) {
	if c.Origin == "" {
		c.Origin = c.Name
	}
	if c.Label == "" {
		c.Label = c.Origin
	}
	if c.Suite == "" {
		c.Suite = c.Codename
	}
	if c.Description == "" {
		c.Description = c.Origin + " packages"
	}
	if c.KeyName == "" {
		c.KeyName = c.Origin + " archive signing key"
	}
	cfgPath := filepath.Join(c.Dir, "armor.toml")
	if _, err := os.Stat(cfgPath); err == nil && !c.Force {
		return nil, fmt.Errorf("%s exists; pass --force to overwrite it", cfgPath)
	}
	tmpl := template.Must(template.New("armor.toml").Funcs(template.FuncMap{
		"q": strconv.Quote,
		"list": func(xs []string) string {
			q := make([]string, len(xs))
			for i, x := range xs {
				q[i] = strconv.Quote(x)
			}
			return "[" + strings.Join(q, ", ") + "]"
		},
	}).Parse(armorTOML))
	// A key held elsewhere is opened before anything is written: one that cannot be
	// reached leaves no half-made project.
	var k *sign.Key
	if c.Key != "" {
		if err := checkKeyFlag(c.Key); err != nil {
			return nil, err
		}
		var err error
		if k, err = remoteKey(context.Background(), c.Key, c.KeyName, pass); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, initTemplate{c, cmp.Or(c.Key, ".armor/keys/signing.sec.asc")}); err != nil {
		return nil, err
	}
	// Validate what we are about to write with the same parser build uses.
	if _, err := config.Parse(buf.Bytes(), cfgPath); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "debs"), 0o755); err != nil {
		return nil, err
	}
	armorDir := filepath.Join(c.Dir, ".armor")
	if err := os.MkdirAll(armorDir, 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(armorDir, ".gitignore"), []byte("# armor's private state: secret keys, build cache, local store.\n*\n"), 0o644); err != nil {
		return nil, err
	}
	if err := ignoreInGit(c.Dir, "public", "debs"); err != nil {
		return nil, err
	}
	keyPath := filepath.Join(armorDir, "keys", "signing.sec.asc")
	if c.Key != "" {
		keyPath = c.Key
	} else {
		var err error
		if k, err = generateKey(c.KeyName, "", sign.Algorithm(c.KeyAlgo), keyPath, pass, c.Force); err != nil {
			return nil, err
		}
	}
	// The public key is also exported where it is committed and published.
	pubBase := config.PublicKeyBase(c.Dir, c.Name)
	if err := exportPublic(k, pubBase); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(cfgPath, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return &initResult{
		Config: cfgPath, Fingerprint: k.Fingerprint(), SecretKey: keyPath,
		PublicKey: pubBase + ".asc", Keyring: pubBase + ".gpg",
		Inputs: filepath.Join(c.Dir, "debs"),
	}, nil
}

// ignoreInGit adds each directory of dir to dir/.gitignore (as "/name/"), unless the file
// lists it already; lines of a .gitignore that exists are kept.
func ignoreInGit(dir string, names ...string) error {
	p := filepath.Join(dir, ".gitignore")
	old, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(old), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	out := append([]byte(nil), old...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	added := false
	for _, n := range names {
		if have["/"+n+"/"] || have["/"+n] || have[n+"/"] || have[n] {
			continue
		}
		if !added && len(old) == 0 {
			out = append(out, "# armor: the tree armor build writes, and the .deb inputs (CI builds them)\n"...)
		}
		out, added = append(out, "/"+n+"/\n"...), true
	}
	if !added {
		return nil
	}
	return atomicfile.WriteFile(p, out, 0o644)
}
