package sign

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ProtonMail/go-crypto/openpgp/s2k"
)

// Algorithm names a public-key algorithm and size for Generate. Info reports other
// sizes of imported RSA keys as "rsaN" and ECDSA keys as "ecdsa".
type Algorithm string

// Algorithms that Generate produces. All give v4 keys, which apt in Debian 12 accepts.
const (
	RSA4096 Algorithm = "rsa4096" // the default
	RSA3072 Algorithm = "rsa3072"
	EdDSA   Algorithm = "eddsa" // legacy EdDSA over Ed25519 (algorithm 22), not algorithm 27
)

// Errors that callers can match with errors.Is.
var (
	ErrPassphraseRequired = errors.New("secret key is encrypted and no passphrase was given")
	ErrWrongPassphrase    = errors.New("wrong passphrase for secret key")
	ErrNoSecretKey        = errors.New("no secret key found (only public key material)")
	ErrBadSignature       = errors.New("signature does not verify")
	ErrUnknownKey         = errors.New("signed by a key that is not in the keyring")
	ErrUnsupportedKey     = errors.New("key algorithm or version not accepted by apt in Debian 12")
)

// Key is an OpenPGP key ready to sign: a certificate (the public key, its user IDs and
// self-signatures, and for a key file its decrypted secret material) and the Signer that
// makes the signatures of its signing key, in this process or in an HSM, KMS or agent.
// A Key is safe for concurrent use by several goroutines once created.
type Key struct {
	entity *openpgp.Entity
	pub    *packet.PublicKey // the key that signs: the primary key or a signing subkey
	signer Signer
	from   string // where a key held elsewhere lives (its key URI); "" for a key file
}

// describe names the key for an error message.
func (k *Key) describe() string {
	if k.from != "" {
		return fmt.Sprintf("key %s (%s)", k.Fingerprint(), k.from)
	}
	return "key " + k.Fingerprint()
}

// Signer returns what makes k's signatures.
func (k *Key) Signer() Signer { return k.signer }

// Close releases what k's Signer holds (a PKCS#11 session, an agent connection).
func (k *Key) Close() error {
	if c, ok := k.signer.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// KeyInfo describes a Key. Algorithm and Bits describe the key that signs, which is the
// primary key unless that one cannot sign.
type KeyInfo struct {
	Fingerprint string // primary key, 40 uppercase hex digits
	UserID      string // primary user ID, such as "Example Archive <archive@example.org>"
	Algorithm   Algorithm
	Bits        int
	Created     time.Time // creation time of the primary key
}

// s2kConfig protects secret keys the way gpg 2.2 does and can read back: iterated and
// salted S2K with SHA-256, AES-256 in CFB mode with a SHA-1 check (no AEAD, no Argon2).
var s2kConfig = &packet.Config{
	S2KConfig: &s2k.Config{
		S2KMode:  s2k.IteratedSaltedS2K,
		Hash:     crypto.SHA256,
		S2KCount: 65011712,
	},
	DefaultCipher: packet.CipherAES256,
}

// Generate creates a new signing-only key (no encryption subkey) that never expires, with
// the user ID "name <email>" and the given creation time (truncated to seconds; the zero
// time means now). An empty algo means RSA4096.
func Generate(name, email string, algo Algorithm, created time.Time) (*Key, error) {
	if created.IsZero() {
		created = time.Now()
	}
	created = created.Truncate(time.Second)
	cfg := &packet.Config{
		DefaultHash:   crypto.SHA512,
		DefaultCipher: packet.CipherAES256,
		Time:          func() time.Time { return created },
	}
	switch algo {
	case RSA4096, "":
		cfg.Algorithm, cfg.RSABits = packet.PubKeyAlgoRSA, 4096
	case RSA3072:
		cfg.Algorithm, cfg.RSABits = packet.PubKeyAlgoRSA, 3072
	case EdDSA:
		cfg.Algorithm, cfg.Curve = packet.PubKeyAlgoEdDSA, packet.Curve25519
	default:
		return nil, fmt.Errorf("generate key: unknown algorithm %q (want %s, %s or %s)", algo, RSA4096, RSA3072, EdDSA)
	}
	e, err := openpgp.NewEntity(name, "", email, cfg)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", algo, err)
	}
	// NewEntity always adds an encryption subkey; an archive key only signs.
	e.Subkeys = nil
	return newKey(e)
}

// newKey picks the signing key of e, which must already be decrypted.
func newKey(e *openpgp.Entity) (*Key, error) {
	signer, err := pickSigner(e, time.Now())
	if err != nil {
		return nil, err
	}
	if signer.PrivateKey.Encrypted {
		return nil, ErrPassphraseRequired
	}
	return fileKey(e, signer)
}

// fileKey is the Key of an entity read from a key file, whose signing key signer is
// decrypted.
func fileKey(e *openpgp.Entity, signer openpgp.Key) (*Key, error) {
	fs, err := newFileSigner(signer.PrivateKey)
	if err != nil {
		return nil, err
	}
	return &Key{entity: e, pub: signer.PublicKey, signer: fs}, nil
}

// hasSecret reports whether pk holds usable secret material (not a gpg stub).
func hasSecret(pk *packet.PrivateKey) bool {
	return pk != nil && !pk.Dummy()
}

// pickSigner returns the primary key if it can sign and has its secret part, else the
// newest valid signing subkey with a secret part.
func pickSigner(e *openpgp.Entity, now time.Time) (openpgp.Key, error) {
	if k, ok := e.SigningKeyById(now, e.PrimaryKey.KeyId); ok && hasSecret(k.PrivateKey) {
		return k, checkAlgorithm(k.PublicKey)
	}
	var best openpgp.Key
	found := false
	for _, sub := range e.Subkeys {
		if !hasSecret(sub.PrivateKey) {
			continue
		}
		k, ok := e.SigningKeyById(now, sub.PublicKey.KeyId)
		if !ok || k.PublicKey != sub.PublicKey {
			continue
		}
		if !found || k.SelfSignature.CreationTime.After(best.SelfSignature.CreationTime) {
			best, found = k, true
		}
	}
	if !found {
		return openpgp.Key{}, fmt.Errorf("key %X has no valid signing key with a secret part (expired, revoked, without sign capability, or a stub): %w",
			e.PrimaryKey.Fingerprint, ErrNoSecretKey)
	}
	return best, checkAlgorithm(best.PublicKey)
}

// checkAlgorithm refuses keys that gpgv 2.2, sqv 1.1 and apt in Debian 12 reject.
func checkAlgorithm(pk *packet.PublicKey) error {
	if pk.Version != 4 {
		return fmt.Errorf("signing key %X is a v%d key, apt needs v4: %w", pk.Fingerprint, pk.Version, ErrUnsupportedKey)
	}
	switch pk.PubKeyAlgo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly, packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoECDSA:
		return nil
	}
	return fmt.Errorf("signing key %X uses public-key algorithm %d, apt needs RSA, ECDSA or legacy EdDSA (22): %w",
		pk.Fingerprint, pk.PubKeyAlgo, ErrUnsupportedKey)
}

// ReadSecretKey reads one secret key, armored or binary, such as the output of
// `gpg --export-secret-keys [--armor]` or of WriteSecret. The input must hold exactly one
// key with secret material. It signs with the primary key if that can sign, else with
// the newest signing subkey. If the key is encrypted, passphrase decrypts it: an empty
// passphrase gives ErrPassphraseRequired, a wrong one ErrWrongPassphrase. Input with
// only public keys gives ErrNoSecretKey.
func ReadSecretKey(r io.Reader, passphrase []byte) (*Key, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	list, err := readEntities(data)
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	var secret []*openpgp.Entity
	for _, e := range list {
		if entityHasSecret(e) {
			secret = append(secret, e)
		}
	}
	switch len(secret) {
	case 0:
		return nil, fmt.Errorf("read secret key: %w", ErrNoSecretKey)
	case 1:
	default:
		return nil, fmt.Errorf("read secret key: input holds %d secret keys, export only the signing key", len(secret))
	}
	e := secret[0]
	signer, err := pickSigner(e, time.Now())
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	if entityEncrypted(e) {
		if len(passphrase) == 0 {
			return nil, fmt.Errorf("read secret key %X: %w", e.PrimaryKey.Fingerprint, ErrPassphraseRequired)
		}
		if err := e.DecryptPrivateKeys(passphrase); err != nil {
			return nil, fmt.Errorf("read secret key %X: %w: %w", e.PrimaryKey.Fingerprint, ErrWrongPassphrase, err)
		}
	}
	k, err := fileKey(e, signer)
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	return k, nil
}

func entityHasSecret(e *openpgp.Entity) bool {
	if hasSecret(e.PrivateKey) {
		return true
	}
	for _, sub := range e.Subkeys {
		if hasSecret(sub.PrivateKey) {
			return true
		}
	}
	return false
}

func entityEncrypted(e *openpgp.Entity) bool {
	if hasSecret(e.PrivateKey) && e.PrivateKey.Encrypted {
		return true
	}
	for _, sub := range e.Subkeys {
		if hasSecret(sub.PrivateKey) && sub.PrivateKey.Encrypted {
			return true
		}
	}
	return false
}

// WriteSecret writes the whole secret key (primary key, user IDs, subkeys) armored. It is
// encrypted with passphrase iff passphrase is not empty, in a form gpg 2.2 imports.
func (k *Key) WriteSecret(w io.Writer, passphrase []byte) error {
	e := k.entity
	if k.from != "" {
		return fmt.Errorf("write secret key %s: it lives in %s, which never hands it out", k.Fingerprint(), k.from)
	}
	if e.PrivateKey == nil {
		return fmt.Errorf("write secret key %s: primary key has no secret packet", k.Fingerprint())
	}
	for _, sub := range e.Subkeys {
		if sub.PrivateKey == nil {
			return fmt.Errorf("write secret key %s: subkey %X has no secret packet", k.Fingerprint(), sub.PublicKey.Fingerprint)
		}
	}
	var plain bytes.Buffer
	if err := e.SerializePrivateWithoutSigning(&plain, nil); err != nil {
		return fmt.Errorf("write secret key %s: %w", k.Fingerprint(), err)
	}
	body := plain.Bytes()
	if len(passphrase) > 0 {
		// Encrypt a copy so that k stays usable for signing.
		c, err := openpgp.ReadEntity(packet.NewReader(bytes.NewReader(body)))
		if err != nil {
			return fmt.Errorf("write secret key %s: copy key: %w", k.Fingerprint(), err)
		}
		if err := c.EncryptPrivateKeys(passphrase, s2kConfig); err != nil {
			return fmt.Errorf("write secret key %s: encrypt: %w", k.Fingerprint(), err)
		}
		var enc bytes.Buffer
		if err := c.SerializePrivateWithoutSigning(&enc, nil); err != nil {
			return fmt.Errorf("write secret key %s: %w", k.Fingerprint(), err)
		}
		body = enc.Bytes()
	}
	return writeArmored(w, openpgp.PrivateKeyType, body)
}

// WritePublicArmored writes the public key armored, as served in a repository's .asc file.
func (k *Key) WritePublicArmored(w io.Writer) error {
	var buf bytes.Buffer
	if err := k.entity.Serialize(&buf); err != nil {
		return fmt.Errorf("write public key %s: %w", k.Fingerprint(), err)
	}
	return writeArmored(w, openpgp.PublicKeyType, buf.Bytes())
}

// WritePublicKeyring writes the public key in binary form, as apt expects it in
// /etc/apt/keyrings/*.gpg and in Signed-By, and as `gpgv --keyring` reads it.
func (k *Key) WritePublicKeyring(w io.Writer) error {
	if err := k.entity.Serialize(w); err != nil {
		return fmt.Errorf("write public keyring %s: %w", k.Fingerprint(), err)
	}
	return nil
}

// writeArmored writes body as one armored block with a CRC24 line, ending with a newline
// (go-crypto's armor writer stops right after the END line's dashes).
func writeArmored(w io.Writer, blockType string, body []byte) error {
	aw, err := armor.Encode(w, blockType, nil)
	if err != nil {
		return fmt.Errorf("armor %s: %w", blockType, err)
	}
	if _, err := aw.Write(body); err != nil {
		return fmt.Errorf("armor %s: %w", blockType, err)
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("armor %s: %w", blockType, err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("armor %s: %w", blockType, err)
	}
	return nil
}

// Fingerprint returns the primary key's fingerprint as 40 uppercase hex digits.
func (k *Key) Fingerprint() string {
	return fmt.Sprintf("%X", k.entity.PrimaryKey.Fingerprint)
}

// Info describes the key.
func (k *Key) Info() KeyInfo {
	info := KeyInfo{
		Fingerprint: k.Fingerprint(),
		Created:     k.entity.PrimaryKey.CreationTime,
	}
	if id := k.entity.PrimaryIdentity(); id != nil {
		info.UserID = id.Name
	}
	pk := k.pub
	if bits, err := pk.BitLength(); err == nil {
		info.Bits = int(bits)
	}
	if pk.PubKeyAlgo == packet.PubKeyAlgoEdDSA {
		// BitLength counts the encoded point with its 0x40 prefix (263 bits); gpg and
		// everyone else call Ed25519 a 255-bit key.
		if c, err := pk.Curve(); err == nil && c == packet.Curve25519 {
			info.Bits = 255
		}
	}
	switch pk.PubKeyAlgo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		info.Algorithm = Algorithm(fmt.Sprintf("rsa%d", info.Bits))
	case packet.PubKeyAlgoEdDSA:
		info.Algorithm = EdDSA
	case packet.PubKeyAlgoECDSA:
		info.Algorithm = "ecdsa"
	default:
		info.Algorithm = Algorithm(strings.ToLower(fmt.Sprintf("algo%d", pk.PubKeyAlgo)))
	}
	return info
}

// ArmorPublicKeys armors a binary keyring (public key packets one after another, as
// WritePublicKeyring writes them), as one PUBLIC KEY BLOCK.
func ArmorPublicKeys(w io.Writer, keyring []byte) error {
	return writeArmored(w, openpgp.PublicKeyType, keyring)
}
