package cli

import (
	"bytes"
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
	Finish bool   `help:"End the overlap: the new key becomes the signing key, the old one leaves the keyring."`
}

// Help says what each step does.
func (c *KeyRotateCmd) Help() string {
	return `armor key rotate starts the change: it generates the new key into .armor/keys/next.sec.asc (with the signing key's passphrase), adds it to keys/<name>-archive-keyring.asc and .gpg beside the old one, sets signing.next_key in armor.toml, and registers it in controld when one is configured (an admin token), so the edge serves both. From then on every build signs InRelease and Release.gpg with both keys, and apt accepts them with either. Publish the keyring package again (armor key package) so users receive the new key with their upgrades; on a CI runner hand the new key over in $ARMOR_NEXT_SIGNING_KEY.

armor key rotate --finish ends it once users have the new key: the new key replaces signing.key's file, the keyring keeps the new key only, signing.next_key goes, and controld forgets the old key.`
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
		return fmt.Errorf("%s: signing.key names no key file: armor key rotate keeps the keys in files beside armor.toml", cfg.Path)
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
	next, err := sign.Generate(name, email, sign.Algorithm(c.Algo), time.Now())
	if err != nil {
		return err
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
	nextPath := filepath.Join(filepath.Dir(cfg.Resolve(cfg.Signing.Key)), "next.sec.asc")
	if err := saveKey(next, nextPath, pass.Data); err != nil {
		return err
	}
	if err := writeKeyring(base, append(published, nextRing.Bytes()...)); err != nil {
		return err
	}
	rel, _ := filepath.Rel(cfg.Dir(), nextPath)
	if err := setNextKey(cfg.Path, filepath.ToSlash(rel)); err != nil {
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
	keys, err := signingKeys(cfg)
	if err != nil {
		return err
	}
	if len(keys) != 2 {
		return fmt.Errorf("%s: signing.next_key names no key", cfg.Path)
	}
	old, next := keys[0], keys[1]
	nextPath, keyPath := cfg.Resolve(cfg.Signing.NextKey), cfg.Resolve(cfg.Signing.Key)
	data, err := os.ReadFile(nextPath)
	if err != nil {
		return err
	}
	var ring bytes.Buffer
	if err := next.WritePublicKeyring(&ring); err != nil {
		return err
	}
	base := config.PublicKeyBase(cfg.Dir(), cfg.Repository.Name)
	if err := writeKeyring(base, ring.Bytes()); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(keyPath, data, 0o600); err != nil {
		return err
	}
	if err := setNextKey(cfg.Path, ""); err != nil {
		return err
	}
	os.Remove(nextPath)
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

// setNextKey sets signing.next_key in the armor.toml at path (removes it for ""),
// keeping the rest of the file as it is.
func setNextKey(path, value string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(data), "\n")
	var out []string
	section := ""
	done := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			if section == "[signing]" && !done && value != "" {
				out = append(out, "next_key = "+strconv.Quote(value)+"\n")
				done = true
			}
			section = t
		}
		if section == "[signing]" && strings.HasPrefix(t, "next_key") {
			continue
		}
		out = append(out, l)
		if section == "[signing]" && t == "[signing]" && value != "" && !done {
			out = append(out, "next_key = "+strconv.Quote(value)+" # armor key rotate: signs beside key until --finish\n")
			done = true
		}
	}
	if value != "" && !done {
		out = append(out, "\n[signing]\nnext_key = "+strconv.Quote(value)+"\n")
	}
	return atomicfile.WriteFile(path, []byte(strings.Join(out, "")), 0o644)
}
