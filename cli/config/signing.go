package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/armor-apt/armor/debian/sign"
)

// Where the signing key and its passphrase come from. This file is the one place that
// decides it, for every command that signs. The environment wins over armor.toml, so a
// CI runner signs with the key its secrets hold while the armor.toml in git keeps naming
// the file a workstation uses:
//
//	secret key:  $ARMOR_SIGNING_KEY (the armored key itself, or a key URI) or
//	             $ARMOR_SIGNING_KEY_FILE (a path), else signing.key (a path relative to
//	             armor.toml, or a key URI)
//	passphrase:  $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE (a path),
//	             else signing.passphrase_file, else the variable signing.passphrase_env names,
//	             else none (the key is not encrypted)
//
// Setting both variables of a pair is an error, not a silent choice. A variable set to
// the empty string counts as unset, as CI systems set a secret that is not defined.
// Secrets never come from flags. A key URI (pkcs11:, awskms://, gcpkms://, gpg-agent:)
// names a key that stays in an HSM, a KMS or gpg-agent; the passphrase is then the
// token's PIN, when the URI does not give one.
const (
	EnvSigningKey     = "ARMOR_SIGNING_KEY"
	EnvSigningKeyFile = "ARMOR_SIGNING_KEY_FILE"
	EnvPassphrase     = "ARMOR_KEY_PASSPHRASE"
	EnvPassphraseFile = "ARMOR_KEY_PASSPHRASE_FILE"
	// The next key of a change of keys, as the signing key, over signing.next_key.
	EnvNextSigningKey     = "ARMOR_NEXT_SIGNING_KEY"
	EnvNextSigningKeyFile = "ARMOR_NEXT_SIGNING_KEY_FILE"
)

// Secret is a secret and where it came from, worded for a user: "$ARMOR_SIGNING_KEY",
// "$ARMOR_KEY_PASSPHRASE_FILE (/run/secrets/pass)",
// "signing.key (/srv/acme/.armor/keys/signing.sec.asc)". A zero Secret is none.
type Secret struct {
	Data []byte
	From string
	URI  string // the key URI, for a key held elsewhere (Data is then empty)
}

// SigningKey returns the secret key that signs, armored or binary, as the precedence
// above says. f may be nil when there is no armor.toml: then only the environment can
// give a key. Finding no key at all is an error that names every way to give one.
func SigningKey(f *File) (Secret, error) {
	s, ok, err := fromEnv(EnvSigningKey, EnvSigningKeyFile)
	if ok || err != nil {
		return asURI(s), err
	}
	if f == nil || f.Signing.Key == "" {
		where := "armor.toml"
		if f != nil {
			where = f.Path
		}
		return Secret{}, fmt.Errorf("no signing key: set $%s (the armored secret key, as a CI secret holds it) or $%s (its path), or name the key file as signing.key in %s",
			EnvSigningKey, EnvSigningKeyFile, where)
	}
	if sign.IsKeyURI(f.Signing.Key) {
		return Secret{URI: strings.TrimSpace(f.Signing.Key), From: fmt.Sprintf("signing.key (%s)", f.Path)}, nil
	}
	return ReadKeyFile(f.Resolve(f.Signing.Key), "signing.key")
}

// asURI turns a key handed over in the environment into a key URI when it is one: the
// value of $ARMOR_SIGNING_KEY, or the content of the file $ARMOR_SIGNING_KEY_FILE names
// (a CI secret mounted as a file, which may then carry a token's pin-value).
func asURI(s Secret) Secret {
	if v := strings.TrimSpace(string(s.Data)); sign.IsKeyURI(v) && !strings.Contains(v, "\n") {
		return Secret{URI: v, From: s.From}
	}
	return s
}

// NextSigningKey returns the new key of a change of keys, which signs beside the signing
// key, from the environment or signing.next_key; ok is false when there is none.
func NextSigningKey(f *File) (s Secret, ok bool, err error) {
	s, ok, err = fromEnv(EnvNextSigningKey, EnvNextSigningKeyFile)
	if ok || err != nil || f == nil || f.Signing.NextKey == "" {
		return asURI(s), ok, err
	}
	if sign.IsKeyURI(f.Signing.NextKey) {
		return Secret{URI: strings.TrimSpace(f.Signing.NextKey), From: fmt.Sprintf("signing.next_key (%s)", f.Path)}, true, nil
	}
	s, err = ReadKeyFile(f.Resolve(f.Signing.NextKey), "signing.next_key")
	return s, err == nil, err
}

// ReadKeyFile reads a secret key file that setting (such as "signing.key" or "--key")
// names. A missing file is an error that says how to make one or hand one over.
func ReadKeyFile(path, setting string) (Secret, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Secret{}, fmt.Errorf("signing key %s (%s) does not exist: create one with `armor key generate` or import one with `armor key import`, or hand it over in $%s or $%s",
			path, setting, EnvSigningKey, EnvSigningKeyFile)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("read signing key (%s): %w", setting, err)
	}
	return Secret{Data: data, From: fmt.Sprintf("%s (%s)", setting, path)}, nil
}

// Passphrase returns the signing key's passphrase as the precedence above says, with
// trailing line breaks of a passphrase file removed. f may be nil when there is no
// armor.toml. No passphrase is not an error: the key may not be encrypted.
func Passphrase(f *File) (Secret, error) {
	s, ok, err := fromEnv(EnvPassphrase, EnvPassphraseFile)
	if err != nil {
		return Secret{}, err
	}
	if ok {
		s.Data = bytes.TrimRight(s.Data, "\r\n")
		return s, nil
	}
	if f == nil {
		return Secret{}, nil
	}
	if p := f.Signing.PassphraseFile; p != "" {
		path := f.Resolve(p)
		data, err := os.ReadFile(path)
		if err != nil {
			return Secret{}, fmt.Errorf("read signing.passphrase_file: %w", err)
		}
		return Secret{Data: bytes.TrimRight(data, "\r\n"), From: fmt.Sprintf("signing.passphrase_file (%s)", path)}, nil
	}
	if e := f.Signing.PassphraseEnv; e != "" {
		if v := os.Getenv(e); v != "" {
			return Secret{Data: []byte(v), From: fmt.Sprintf("$%s (signing.passphrase_env)", e)}, nil
		}
	}
	return Secret{}, nil
}

// PassphraseHint says where a passphrase can be given, for an error about an encrypted
// key that came without one. f may be nil.
func PassphraseHint(f *File) string {
	h := fmt.Sprintf("set $%s or $%s", EnvPassphrase, EnvPassphraseFile)
	if f != nil && f.Signing.PassphraseEnv != "" {
		h += fmt.Sprintf(", or $%s as signing.passphrase_env says", f.Signing.PassphraseEnv)
	}
	return h
}

// fromEnv reads the secret a pair of variables hands over: value holds the secret, file
// names a file that holds it. Neither set gives ok == false.
func fromEnv(value, file string) (s Secret, ok bool, err error) {
	v, p := os.Getenv(value), os.Getenv(file)
	switch {
	case v != "" && p != "":
		return Secret{}, false, fmt.Errorf("both $%s and $%s are set: set only one of them", value, file)
	case v != "":
		return Secret{Data: []byte(v), From: "$" + value}, true, nil
	case p != "":
		data, err := os.ReadFile(p)
		if err != nil {
			// The variable's value is not repeated: a CI job that put the secret itself
			// there instead of a path would see it in its log.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return Secret{}, false, fmt.Errorf("read the file $%s names: %w", file, err)
		}
		return Secret{Data: data, From: fmt.Sprintf("$%s (%s)", file, p)}, true, nil
	}
	return Secret{}, false, nil
}

// PublicKeyBase is where armor init exports a repository's public key, without the
// extension: keys/<name>-archive-keyring under dir, as .asc (armored) and .gpg (the
// binary keyring apt's Signed-By takes). Those files are what the repository's users
// install, so a key that signs for the repository must be in them.
func PublicKeyBase(dir, name string) string {
	return filepath.Join(dir, "keys", name+"-archive-keyring")
}

// PublishedKeyrings returns those of keys/<name>-archive-keyring.asc and .gpg beside
// armor.toml that exist (or that cannot be checked, so that reading them reports why).
func (f *File) PublishedKeyrings() []string {
	base := PublicKeyBase(f.Dir(), f.Repository.Name)
	var out []string
	for _, ext := range []string{".asc", ".gpg"} {
		if _, err := os.Stat(base + ext); !errors.Is(err, fs.ErrNotExist) {
			out = append(out, base+ext)
		}
	}
	return out
}
