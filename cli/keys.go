package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/debian/sign/keyuri"
	"github.com/armor-apt/armor/internal/atomicfile"
)

// KeyCmd groups the key subcommands.
type KeyCmd struct {
	Generate KeyGenerateCmd `cmd:"" help:"Generate a new signing key."`
	Import   KeyImportCmd   `cmd:"" help:"Import a secret key exported from gpg (gpg --export-secret-keys --armor)."`
	Export   KeyExportCmd   `cmd:"" help:"Export the public key, armored (.asc) and as a binary keyring (.gpg)."`
	List     KeyListCmd     `cmd:"" help:"List the secret keys in a key directory."`
	Package  KeyPackageCmd  `cmd:"" help:"Build <name>-archive-keyring_<version>_all.deb: the published keyring and a .sources file, for apt users."`
	Rotate   KeyRotateCmd   `cmd:"" help:"Change the signing key with an overlap: both keys sign until --finish."`
}

// passphrase returns the passphrase the key commands that take no armor.toml use to
// protect or read a key file: $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE, by
// the one rule config.Passphrase applies for every command.
func passphrase() ([]byte, error) {
	p, err := config.Passphrase(nil)
	return p.Data, err
}

// KeyGenerateCmd generates a key.
type KeyGenerateCmd struct {
	Name  string `help:"User ID name." default:"armor repository signing key"`
	Email string `help:"User ID email."`
	Algo  string `help:"rsa4096 (default), rsa3072 or eddsa (legacy EdDSA, algorithm 22)." default:"rsa4096" enum:"rsa4096,rsa3072,eddsa"`
	Out   string `help:"Secret key file to write (mode 0600); the public key goes beside it as .pub.asc and .pub.gpg." default:".armor/keys/signing.sec.asc" type:"path"`
	Force bool   `help:"Overwrite an existing key file."`
}

// Run generates the key.
func (c *KeyGenerateCmd) Run(g *Globals) error {
	pass, err := passphrase()
	if err != nil {
		return err
	}
	k, err := generateKey(c.Name, c.Email, sign.Algorithm(c.Algo), c.Out, pass, c.Force)
	if err != nil {
		return err
	}
	return printKey(g, k, c.Out)
}

func generateKey(name, email string, algo sign.Algorithm, out string, pass []byte, force bool) (*sign.Key, error) {
	if _, err := os.Stat(out); err == nil && !force {
		return nil, fmt.Errorf("key file %s exists; pass --force to replace it", out)
	}
	k, err := sign.Generate(name, email, algo, time.Now())
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	if err := saveKey(k, out, pass); err != nil {
		return nil, err
	}
	return k, nil
}

// saveKey writes the secret key (0600, in a directory git ignores when it is .armor)
// and its public key beside it.
func saveKey(k *sign.Key, out string, pass []byte) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return fmt.Errorf("create key directory: %w", err)
	}
	var sec bytes.Buffer
	if err := k.WriteSecret(&sec, pass); err != nil {
		return fmt.Errorf("write secret key: %w", err)
	}
	if err := atomicfile.WriteFile(out, sec.Bytes(), 0o600); err != nil {
		return err
	}
	return exportPublic(k, publicBase(out))
}

func publicBase(secretPath string) string {
	base := strings.TrimSuffix(secretPath, ".asc")
	base = strings.TrimSuffix(base, ".sec")
	return base + ".pub"
}

// exportPublic writes base.asc (armored) and base.gpg (binary keyring for Signed-By).
func exportPublic(k *sign.Key, base string) error {
	var bin bytes.Buffer
	if err := k.WritePublicKeyring(&bin); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	return writeKeyring(base, bin.Bytes())
}

func printKey(g *Globals, k *sign.Key, path string) error {
	info := k.Info()
	if g.JSON {
		return printJSON(g.stdout, map[string]any{
			"fingerprint": info.Fingerprint, "user_id": info.UserID, "algorithm": info.Algorithm,
			"bits": info.Bits, "created": info.Created.UTC(), "secret_key": path,
			"public_key": publicBase(path) + ".asc", "keyring": publicBase(path) + ".gpg",
		})
	}
	fmt.Fprintf(g.stdout, "key %s (%s", info.Fingerprint, info.Algorithm)
	if info.Bits > 0 {
		fmt.Fprintf(g.stdout, " %d", info.Bits)
	}
	fmt.Fprintf(g.stdout, ") %s\n  secret key: %s (keep it private; never commit it)\n  public key: %s.asc, keyring %s.gpg\n",
		info.UserID, path, publicBase(path), publicBase(path))
	return nil
}

// signingKey returns the key that signs for the repository cfg describes (see
// loadSigningKey), and refuses a key that the repository's published keyring does not
// hold. Every command that signs (build, repos create's key upload, rollback) gets its
// key here.
func signingKey(cfg *config.File) (*sign.Key, error) {
	keys, _, err := signingKeys(cfg)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// signingKeys returns the signing key and, during a change of keys, the next key, each
// checked as signingKey checks its key. armor.toml's signing.next_key says whether a
// change of keys is under way; $ARMOR_NEXT_SIGNING_KEY only hands its key over (see
// nextKeyOutsideRotation when it is set while none is).
func signingKeys(cfg *config.File) ([]*sign.Key, []string, error) {
	next, ok, err := config.NextSigningKey(cfg)
	if err != nil {
		return nil, nil, err
	}
	if ok && cfg != nil && cfg.Signing.NextKey == "" {
		return nextKeyOutsideRotation(cfg, next)
	}
	k, err := signingKeyOnly(cfg)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return []*sign.Key{k}, nil, nil
	}
	keys, err := withNextKey(cfg, k, next)
	return keys, nil, err
}

// nextKeyOutsideRotation handles $ARMOR_NEXT_SIGNING_KEY set while armor.toml has no
// signing.next_key: a CI secret left behind after armor key rotate --finish (or set
// before the armor.toml of armor key rotate was committed). When it holds the signing
// key itself (the secrets were updated, the old one not deleted) it is harmless: the
// key signs once, with a warning. Otherwise the build would sign with a key the
// published keyring may not hold, or without the one it does: refused, saying which
// secret to change.
func nextKeyOutsideRotation(cfg *config.File, next config.Secret) ([]*sign.Key, []string, error) {
	k, from, err := loadSigningKey(cfg)
	if err != nil {
		return nil, nil, err
	}
	pass, err := config.Passphrase(cfg)
	if err != nil {
		return nil, nil, err
	}
	n, err := readSigningKey(next, pass, cfg)
	if err != nil {
		return nil, nil, err
	}
	if n.Fingerprint() != k.Fingerprint() {
		return nil, nil, fmt.Errorf("%s holds key %s, but no change of keys is under way: %s has no signing.next_key, and %s holds key %s. After armor key rotate --finish the new key signs alone: put it in $%s and delete $%s. To start a change of keys, run armor key rotate and commit armor.toml and keys/ first",
			next.From, n.Fingerprint(), cfg.Path, from, k.Fingerprint(), config.EnvSigningKey, config.EnvNextSigningKey)
	}
	if err := checkPublished(cfg, k, from); err != nil {
		return nil, nil, err
	}
	warn := fmt.Sprintf("%s holds the signing key %s itself and no change of keys is under way (%s has no signing.next_key): it signs once; delete $%s",
		next.From, k.Fingerprint(), cfg.Path, config.EnvNextSigningKey)
	return []*sign.Key{k}, []string{warn}, nil
}

// withNextKey reads the next key of a change of keys and returns both.
func withNextKey(cfg *config.File, k *sign.Key, next config.Secret) ([]*sign.Key, error) {
	pass, err := config.Passphrase(cfg)
	if err != nil {
		return nil, err
	}
	n, err := readSigningKey(next, pass, cfg)
	if err != nil {
		return nil, err
	}
	if n.Fingerprint() == k.Fingerprint() {
		return nil, fmt.Errorf("the next signing key (from %s) is the signing key itself", next.From)
	}
	if err := checkPublished(cfg, n, next.From); err != nil {
		return nil, err
	}
	return []*sign.Key{k, n}, nil
}

func signingKeyOnly(cfg *config.File) (*sign.Key, error) {
	k, from, err := loadSigningKey(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkPublished(cfg, k, from); err != nil {
		return nil, err
	}
	return k, nil
}

// loadSigningKey reads the secret key and its passphrase from where config.SigningKey
// and config.Passphrase say (the environment, else armor.toml; cfg may be nil when there
// is none) and decrypts the key. It returns where the key came from.
func loadSigningKey(cfg *config.File) (*sign.Key, string, error) {
	sec, err := config.SigningKey(cfg)
	if err != nil {
		return nil, "", err
	}
	pass, err := config.Passphrase(cfg)
	if err != nil {
		return nil, "", err
	}
	k, err := readSigningKey(sec, pass, cfg)
	return k, sec.From, err
}

// readSigningKey decrypts a secret key, or opens the key a key URI names, naming where
// the key and its passphrase came from in errors. cfg, which may be nil, only words the
// hint for a missing passphrase (and gives a key URI its published key).
func readSigningKey(sec, pass config.Secret, cfg *config.File) (*sign.Key, error) {
	if sec.URI != "" {
		return openKeyURI(context.Background(), sec, pass, cfg)
	}
	k, err := sign.ReadSecretKey(bytes.NewReader(sec.Data), pass.Data)
	switch {
	case err == nil:
		return k, nil
	case errors.Is(err, sign.ErrPassphraseRequired) && pass.From != "":
		return nil, fmt.Errorf("signing key from %s is encrypted, and the passphrase from %s is empty", sec.From, pass.From)
	case errors.Is(err, sign.ErrPassphraseRequired):
		return nil, fmt.Errorf("signing key from %s is encrypted: %s", sec.From, config.PassphraseHint(cfg))
	case errors.Is(err, sign.ErrWrongPassphrase):
		return nil, fmt.Errorf("signing key from %s: wrong passphrase from %s", sec.From, pass.From)
	case errors.Is(err, sign.ErrUnsupportedKey):
		return nil, fmt.Errorf("signing key from %s: %w", sec.From, err)
	}
	return nil, fmt.Errorf("%s holds no usable secret key (%w): give it an armored secret key, such as `gpg --export-secret-keys --armor KEYID` prints", sec.From, err)
}

// openKeyURI opens a key held elsewhere and matches it with its OpenPGP public key: the
// repository's published keyring (keys/), or the certificate its backend keeps (gpg's,
// for gpg-agent). The PIN of a PKCS#11 token whose URI gives none is the passphrase.
func openKeyURI(ctx context.Context, sec, pass config.Secret, cfg *config.File) (*sign.Key, error) {
	s, err := keyuri.Open(ctx, sec.URI, pass.Data)
	if errors.Is(err, sign.ErrSignerDenied) && pass.From != "" && !keyuri.HasSecret(sec.URI) {
		return nil, fmt.Errorf("signing key from %s (PIN from %s): %w", sec.From, pass.From, err)
	}
	if err != nil {
		return nil, fmt.Errorf("signing key from %s: %w", sec.From, err)
	}
	var certs [][]byte
	if c := keyuri.Certificate(s); c != nil {
		certs = append(certs, c)
	}
	var paths []string
	if cfg != nil {
		paths = cfg.PublishedKeyrings()
	}
	for _, p := range paths {
		data, err := readFile(p)
		if err != nil {
			return nil, fmt.Errorf("published keyring: %w", err)
		}
		certs = append(certs, data)
	}
	if len(certs) == 0 {
		base := "keys/<name>-archive-keyring.gpg"
		if cfg != nil {
			base = config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name) + ".gpg"
		}
		return nil, fmt.Errorf("signing key from %s (%s) has no OpenPGP public key: it is kept in %s, which armor init --key writes; commit it beside armor.toml",
			sec.From, keyuri.Redact(sec.URI), base)
	}
	k, err := sign.NewKey(s, keyuri.Redact(sec.URI), certs...)
	if err != nil {
		return nil, fmt.Errorf("signing key from %s: %w (in %s): sign with the published key, or publish this one first (armor key rotate --to URI)",
			sec.From, err, strings.Join(paths, ", "))
	}
	return k, nil
}

// checkPublished refuses a key whose signatures the repository's published keyring
// (keys/<name>-archive-keyring.asc and .gpg, which armor init writes and apt users
// install) would reject: a release signed with it would fail `apt-get update` for every
// user. A project without those files is not checked.
func checkPublished(cfg *config.File, k *sign.Key, from string) error {
	for _, path := range cfg.PublishedKeyrings() {
		data, err := readFile(path)
		if err != nil {
			return fmt.Errorf("published keyring: %w", err)
		}
		ok, fprs, err := k.InKeyring(data)
		if err != nil {
			return fmt.Errorf("published keyring %s: %w", path, err)
		}
		if !ok && slices.Contains(fprs, k.Fingerprint()) {
			return fmt.Errorf("the published copy of signing key %s (from %s) in %s does not verify its signatures (expired, revoked, or without the signing subkey): apt would reject what it signs; publish the key again (armor key export --out %s)",
				k.Fingerprint(), from, path, config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name))
		}
		if !ok {
			return fmt.Errorf("signing key %s (from %s) is not the repository's published key %s (in %s): apt would reject what it signs for users who installed that keyring; sign with the published key, or publish the new key first (armor key export --out %s)",
				k.Fingerprint(), from, strings.Join(fprs, ", "), path, config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name))
		}
	}
	return nil
}

// KeyImportCmd imports a key.
type KeyImportCmd struct {
	File  string `arg:"" help:"Armored or binary secret key ('-' for standard input)."`
	Out   string `help:"Secret key file to write." default:".armor/keys/signing.sec.asc" type:"path"`
	Force bool   `help:"Overwrite an existing key file."`
}

// Run imports the key. The passphrase from the environment decrypts it and protects the
// stored copy.
func (c *KeyImportCmd) Run(g *Globals) error {
	pass, err := passphrase()
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.Out); err == nil && !c.Force {
		return fmt.Errorf("key file %s exists; pass --force to replace it", c.Out)
	}
	var r io.Reader = os.Stdin
	if c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			return fmt.Errorf("import key: %w", err)
		}
		defer f.Close()
		r = f
	}
	k, err := sign.ReadSecretKey(r, pass)
	if err != nil {
		return fmt.Errorf("import key %s: %w", c.File, err)
	}
	if err := saveKey(k, c.Out, pass); err != nil {
		return err
	}
	return printKey(g, k, c.Out)
}

// KeyExportCmd exports the public key.
type KeyExportCmd struct {
	Key string `help:"Secret key file, or a key URI (pkcs11:, awskms://, gpg-agent:) whose public key keys/ already holds (default: the key armor build signs with: $ARMOR_SIGNING_KEY or $ARMOR_SIGNING_KEY_FILE, else signing.key in armor.toml)."`
	Out string `help:"Output base name: writes OUT.asc and OUT.gpg." default:"signing-key" type:"path"`
}

// Run exports the public key of --key, or of the key armor build would sign with. It
// does not check the key against keys/: exporting a new key is how it gets there.
// An explicit --key wins over the environment, as a flag does.
func (c *KeyExportCmd) Run(g *Globals) error {
	k, err := c.key(g)
	if err != nil {
		return err
	}
	if err := exportPublic(k, c.Out); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "wrote %s.asc and %s.gpg (%s)\n", c.Out, c.Out, k.Fingerprint())
	return nil
}

func (c *KeyExportCmd) key(g *Globals) (*sign.Key, error) {
	if c.Key != "" {
		pass, err := config.Passphrase(nil)
		if err != nil {
			return nil, err
		}
		if sign.IsKeyURI(c.Key) {
			if err := checkKeyFlag(c.Key); err != nil {
				return nil, fmt.Errorf("--key: %w", err)
			}
			cfg, _ := config.Load(g.Config) // keys/ of the project, when there is one
			return readSigningKey(config.Secret{URI: c.Key, From: "--key"}, pass, cfg)
		}
		sec, err := config.ReadKeyFile(c.Key, "--key")
		if err != nil {
			return nil, err
		}
		return readSigningKey(sec, pass, nil)
	}
	cfg, err := config.Load(g.Config)
	if errors.Is(err, os.ErrNotExist) {
		cfg = nil // the environment alone may give the key
	} else if err != nil {
		return nil, err
	}
	k, _, err := loadSigningKey(cfg)
	return k, err
}

// KeyListCmd lists keys.
type KeyListCmd struct {
	Dir string `help:"Key directory." default:".armor/keys" type:"path"`
}

// Run lists the secret keys in the directory.
func (c *KeyListCmd) Run(g *Globals) error {
	paths, err := filepath.Glob(filepath.Join(c.Dir, "*.sec.asc"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	pass, err := config.Passphrase(nil)
	if err != nil {
		return err
	}
	type row struct {
		Path        string         `json:"path"`
		Fingerprint string         `json:"fingerprint,omitempty"`
		UserID      string         `json:"user_id,omitempty"`
		Algorithm   sign.Algorithm `json:"algorithm,omitempty"`
		Bits        int            `json:"bits,omitempty"`
		Created     time.Time      `json:"created,omitzero"`
		Error       string         `json:"error,omitempty"`
	}
	var rows []row
	for _, p := range paths {
		sec, err := config.ReadKeyFile(p, "file")
		var k *sign.Key
		if err == nil {
			k, err = readSigningKey(sec, pass, nil)
		}
		if err != nil {
			rows = append(rows, row{Path: p, Error: err.Error()})
			continue
		}
		i := k.Info()
		rows = append(rows, row{p, i.Fingerprint, i.UserID, i.Algorithm, i.Bits, i.Created.UTC(), ""})
	}
	if g.JSON {
		return printJSON(g.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(g.stdout, "no keys in %s\n", c.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FINGERPRINT\tALGORITHM\tCREATED\tUSER ID\tFILE")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "?\t\t\t%s\t%s\n", r.Error, r.Path)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Fingerprint, r.Algorithm, r.Created.Format("2006-01-02"), r.UserID, r.Path)
	}
	return tw.Flush()
}
