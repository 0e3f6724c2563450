package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/atomicfile"
)

// KeyRotateCmd changes the repository's signing key with an overlap, as Debian does:
// first both keys sign, while users get the new one (from the keyring package, or the
// edge's keyring), then the new one alone.
type KeyRotateCmd struct {
	ControldFlags
	Algo   string `help:"The new key's algorithm: rsa4096 (default), rsa3072 or eddsa." default:"rsa4096" enum:"rsa4096,rsa3072,eddsa"`
	To     string `help:"The new key is held elsewhere, named by URI (pkcs11:..., awskms://..., gpg-agent:FINGERPRINT) instead of generated into a file. A token PIN comes from $ARMOR_KEY_PASSPHRASE or pin-source, never from this flag."`
	Import string `help:"The new key is this secret key file (armored or binary: a key made ahead of time, or gpg --export-secret-keys --armor output) instead of one generated now; it is stored as .armor/keys/next.sec.asc with the signing key's passphrase." type:"existingfile"`
	Finish bool   `help:"End the overlap: the new key becomes the signing key, the old one leaves the keyring."`
}

// Help says what each step does.
func (c *KeyRotateCmd) Help() string {
	return `armor key rotate starts the change: it generates the new key into .armor/keys/next.sec.asc (with the signing key's passphrase), adds it to keys/<name>-archive-keyring.asc and .gpg beside the old one, sets signing.next_key in armor.toml, and registers it in controld when one is configured (an admin token), so the edge serves both. From then on every build signs InRelease and Release.gpg with both keys, and apt accepts them with either. Publish the keyring package again (armor key package) so users receive the new key with their upgrades; on a CI runner hand the new key over in $ARMOR_NEXT_SIGNING_KEY.

With --import FILE the new key is one made ahead of time (as Debian's archive keys are, months before they sign), read with the signing key's passphrase. With --to URI the new key is one held in an HSM, a KMS or gpg-agent: its public half goes into the keyring and signing.next_key names the URI; no key file is made. Either key may be a key file or a key URI.

armor key rotate --finish ends it once users have the new key: the new key becomes signing.key (a new key file replaces signing.key's file when both are files), the keyring keeps the new key only, signing.next_key goes, and controld forgets the old key.`
}

// Run rotates.
func (c *KeyRotateCmd) Run(g *Globals) error {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	if c.Finish {
		return c.finish(g, cfg)
	}
	if cfg.Signing.NextKey != "" {
		return fmt.Errorf("%s: a change of keys is under way (signing.next_key = %q): end it with armor key rotate --finish", cfg.Path, cfg.Signing.NextKey)
	}
	if cfg.Signing.Key == "" {
		return fmt.Errorf("%s: signing.key names no key: armor key rotate keeps the key files or key URIs in armor.toml", cfg.Path)
	}
	if c.To != "" {
		if c.Import != "" {
			return fmt.Errorf("--to and --import both name the new key: give one of them")
		}
		if err := checkKeyFlag(c.To); err != nil {
			return fmt.Errorf("--to: %w", err)
		}
	}
	old, err := signingKeyOnly(cfg)
	if err != nil {
		return err
	}
	pass, err := config.Passphrase(cfg)
	if err != nil {
		return err
	}
	base := config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name)
	published, err := os.ReadFile(base + ".gpg")
	if err != nil {
		return fmt.Errorf("the published keyring: %w", err)
	}
	name, email := splitUserID(old.Info().UserID)
	var next *sign.Key
	switch {
	case c.To != "":
		next, err = remoteKey(g.ctx, c.To, old.Info().UserID, pass.Data)
	case c.Import != "":
		next, err = importKey(c.Import, pass.Data)
	default:
		next, err = sign.Generate(name, email, sign.Algorithm(c.Algo), time.Now())
	}
	if err != nil {
		return err
	}
	if next.Fingerprint() == old.Fingerprint() {
		return fmt.Errorf("the new key %s is the signing key itself", cmp.Or(c.To, c.Import))
	}
	var nextRing, armored bytes.Buffer
	if err := next.WritePublicKeyring(&nextRing); err != nil {
		return err
	}
	if err := next.WritePublicArmored(&armored); err != nil {
		return err
	}
	// controld first: if it refuses, nothing here has changed.
	if err := c.controld(g, cfg, func(cl controldKeys, repo string) error {
		_, err := cl.AddKey(g.ctx, repo, armored.String())
		return err
	}); err != nil {
		return err
	}
	nextRef := c.To
	nextPath := c.To
	if c.To == "" {
		dir := filepath.Join(cfg.Dir(), ".armor", "keys")
		if !sign.IsKeyURI(cfg.Signing.Key) {
			dir = filepath.Dir(cfg.Resolve(cfg.Signing.Key))
		}
		nextPath = filepath.Join(dir, "next.sec.asc")
		if err := saveKey(next, nextPath, pass.Data); err != nil {
			return err
		}
		rel, _ := filepath.Rel(cfg.Dir(), nextPath)
		nextRef = filepath.ToSlash(rel)
	}
	if err := writeKeyring(base, append(published, nextRing.Bytes()...)); err != nil {
		return err
	}
	if err := setSigning(cfg.Path, "next_key", nextRef); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "new key %s (next to %s): builds now sign with both\n  secret key: %s (signing.next_key in %s)\n  keyring: %s.asc and .gpg hold both keys\n  next: armor key package, armor build, armor push; armor key rotate --finish once users have the new key\n",
		next.Fingerprint(), old.Fingerprint(), nextPath, cfg.Path, base)
	return nil
}

func (c *KeyRotateCmd) finish(g *Globals, cfg *config.File) error {
	if cfg.Signing.NextKey == "" {
		return fmt.Errorf("%s: no change of keys is under way (no signing.next_key): start one with armor key rotate", cfg.Path)
	}
	keys, _, err := signingKeys(cfg)
	if err != nil {
		return err
	}
	if len(keys) != 2 {
		return fmt.Errorf("%s: signing.next_key names no key", cfg.Path)
	}
	old, next := keys[0], keys[1]
	var ring bytes.Buffer
	if err := next.WritePublicKeyring(&ring); err != nil {
		return err
	}
	base := config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name)
	if err := writeKeyring(base, ring.Bytes()); err != nil {
		return err
	}
	if err := c.promoteNext(cfg); err != nil {
		return err
	}
	err = c.controld(g, cfg, func(cl controldKeys, repo string) error {
		_, err := cl.RemoveKey(g.ctx, repo, old.Fingerprint())
		return err
	})
	if err != nil {
		fmt.Fprintf(g.stderr, "armor: controld still lists the old key %s: %v\n", old.Fingerprint(), err)
	}
	fmt.Fprintf(g.stdout, "key %s now signs alone; %s left the keyring\n", next.Fingerprint(), old.Fingerprint())
	return nil
}

// promoteNext makes signing.next_key the signing key in armor.toml. When both are key
// files, the new key's file replaces the old one's, so that signing.key keeps its path
// (and a CI secret named after it stays right); otherwise signing.key takes the next
// key's value, a URI or a path.
func (c *KeyRotateCmd) promoteNext(cfg *config.File) error {
	if sign.IsKeyURI(cfg.Signing.Key) || sign.IsKeyURI(cfg.Signing.NextKey) {
		if err := setSigning(cfg.Path, "key", cfg.Signing.NextKey); err != nil {
			return err
		}
		return setSigning(cfg.Path, "next_key", "")
	}
	nextPath, keyPath := cfg.Resolve(cfg.Signing.NextKey), cfg.Resolve(cfg.Signing.Key)
	data, err := os.ReadFile(nextPath)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(keyPath, data, 0o600); err != nil {
		return err
	}
	if err := setSigning(cfg.Path, "next_key", ""); err != nil {
		return err
	}
	os.Remove(nextPath)
	return nil
}

// importKey reads the secret key file that --import names, decrypting it with pass.
func importKey(path string, pass []byte) (*sign.Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--import: %w", err)
	}
	defer f.Close()
	k, err := sign.ReadSecretKey(f, pass)
	if err != nil {
		return nil, fmt.Errorf("--import %s: %w", path, err)
	}
	return k, nil
}

// controldKeys is what rotation asks of controld.
type controldKeys interface {
	AddKey(ctx context.Context, repo, armoredKey string) (*api.Repository, error)
	RemoveKey(ctx context.Context, repo, fingerprint string) (*api.Repository, error)
}

// splitUserID splits "Name <email>" into its parts.
func splitUserID(uid string) (string, string) {
	name, rest, ok := strings.Cut(uid, " <")
	if !ok {
		return uid, ""
	}
	return name, strings.TrimSuffix(rest, ">")
}

// controld runs do against the configured controld, if any.
func (c *KeyRotateCmd) controld(g *Globals, cfg *config.File, do func(controldKeys, string) error) error {
	url := c.url(cfg)
	if url == "" {
		return nil
	}
	cl, err := readClient(cfg, url, c.CACert)
	if err != nil {
		return err
	}
	if err := do(cl, cfg.Repository.Name); err != nil {
		return fmt.Errorf("controld %s: %w (an admin token in $%s registers keys; nothing was changed here)", url, err, cfg.Controld.TokenEnv)
	}
	return nil
}

// writeKeyring writes a binary keyring as base.gpg and armored as base.asc.
func writeKeyring(base string, keyring []byte) error {
	var asc bytes.Buffer
	if err := sign.ArmorPublicKeys(&asc, keyring); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(base+".gpg", keyring, 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(base+".asc", asc.Bytes(), 0o644)
}

// setSigning sets field (key or next_key) of [signing] in the armor.toml at path (removes
// it for ""), keeping the rest of the file as it is.
func setSigning(path, field, value string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line := field + " = " + strconv.Quote(value)
	if field == "next_key" {
		line += " # armor key rotate: signs beside key until --finish"
	}
	line += "\n"
	var out []string
	section := ""
	done := false
	for _, l := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			section = t
		}
		if rest, ok := strings.CutPrefix(t, field); section == "[signing]" && ok && strings.HasPrefix(strings.TrimSpace(rest), "=") {
			continue
		}
		out = append(out, l)
		if section == "[signing]" && t == "[signing]" && value != "" && !done {
			out = append(out, line)
			done = true
		}
	}
	if value != "" && !done {
		out = append(out, "\n[signing]\n"+line)
	}
	return atomicfile.WriteFile(path, []byte(strings.Join(out, "")), 0o644)
}
