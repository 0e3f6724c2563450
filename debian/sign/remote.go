package sign

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// URISchemes are the prefixes of the key URIs that name a key held elsewhere, in the
// forms cosign's users write: a PKCS#11 token (RFC 7512), AWS KMS, Google Cloud KMS and
// gpg-agent (which reaches smartcards and YubiKeys too).
var URISchemes = []string{"pkcs11:", "awskms://", "gcpkms://", "gpg-agent:"}

// IsKeyURI reports whether s names a key by URI rather than being a key file's path or
// the armored key itself.
func IsKeyURI(s string) bool {
	s = strings.TrimSpace(s)
	for _, p := range URISchemes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// NewKey returns the Key whose signatures s makes, from (a key URI) naming it in errors.
// certs are OpenPGP public keys (armored or binary keyrings, such as the repository's
// keys/<name>-archive-keyring.gpg or `gpg --export`): the certificate is the one whose
// primary key or signing subkey has s's public half. Its creation time, kept there, fixes
// the fingerprint. If none has it, the error wraps ErrKeyMismatch and names the key's
// fingerprint beside those the certificates hold.
func NewKey(s Signer, from string, certs ...[]byte) (*Key, error) {
	var fprs []string
	var first *packet.PublicKey
	for _, c := range certs {
		list, err := readEntities(c)
		if err != nil {
			return nil, fmt.Errorf("key %s: read its public key: %w", from, err)
		}
		for _, e := range list {
			if first == nil {
				first = e.PrimaryKey
			}
			if f := fmt.Sprintf("%X", e.PrimaryKey.Fingerprint); !slices.Contains(fprs, f) {
				fprs = append(fprs, f)
			}
			if pk := matchingKey(e, s.Public()); pk != nil {
				if err := checkAlgorithm(pk); err != nil {
					return nil, fmt.Errorf("key %s: %w", from, err)
				}
				return &Key{entity: e, pub: pk, signer: s, from: from}, nil
			}
		}
	}
	if len(fprs) == 0 {
		return nil, fmt.Errorf("key %s: no OpenPGP public key to match it with: %w", from, ErrKeyMismatch)
	}
	own := "(a key of another kind)"
	if pk, err := publicKeyPacket(s.Public(), first.CreationTime); err == nil {
		own = fmt.Sprintf("%X", pk.Fingerprint)
	}
	return nil, fmt.Errorf("key %s is %s (with the creation time of %s), not the published key %s: %w",
		from, own, fprs[0], strings.Join(fprs, ", "), ErrKeyMismatch)
}

// matchingKey returns the key of e (the primary key, else a subkey that may sign) whose
// public half is pub.
func matchingKey(e *openpgp.Entity, pub crypto.PublicKey) *packet.PublicKey {
	if sameKey(e.PrimaryKey, pub) {
		return e.PrimaryKey
	}
	for _, sub := range e.Subkeys {
		if sameKey(sub.PublicKey, pub) && sub.Sig != nil && (!sub.Sig.FlagsValid || sub.Sig.FlagSign) {
			return sub.PublicKey
		}
	}
	return nil
}

// Certify makes a new OpenPGP certificate for the key s holds and returns it as a Key: a
// v4 public key created at created (to the second) with the user ID uid, self-signed
// through s (a positive certification with SHA-512, flags certify and sign, no expiry),
// as `armor init --key URI` publishes it in keys/. The same key and created give the
// same fingerprint; the certificate's bytes depend on created and uid only.
func Certify(ctx context.Context, s Signer, from, uid string, created time.Time) (*Key, error) {
	created = created.Truncate(time.Second)
	pub, err := publicKeyPacket(s.Public(), created)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", from, err)
	}
	var keyPkt bytes.Buffer
	if err := pub.Serialize(&keyPkt); err != nil {
		return nil, fmt.Errorf("key %s: %w", from, err)
	}
	write := func(w io.Writer) error {
		if err := pub.SerializeForHash(w); err != nil {
			return err
		}
		var l [5]byte
		l[0] = 0xb4
		l[1], l[2], l[3], l[4] = byte(len(uid)>>24), byte(len(uid)>>16), byte(len(uid)>>8), byte(len(uid))
		w.Write(l[:])
		_, err := w.Write([]byte(uid))
		return err
	}
	spec := sigSpec{typ: packet.SigTypePositiveCert, hash: crypto.SHA512, at: created, extra: []subpacket{
		{subKeyFlags, []byte{packet.KeyFlagCertify | packet.KeyFlagSign}},
		{subPreferredHash, []byte{10, 9, 8}}, // SHA512, SHA384, SHA256
		{subFeatures, []byte{1}},             // modification detection
	}}
	sig, err := signPacket(ctx, s, pub, spec, write)
	if err != nil {
		return nil, fmt.Errorf("certify key %s: %w", from, err)
	}
	cert := append(keyPkt.Bytes(), appendPacket(nil, 13, []byte(uid))...)
	cert = append(cert, sig...)
	e, err := openpgp.ReadEntity(packet.NewReader(bytes.NewReader(cert)))
	if err != nil {
		return nil, fmt.Errorf("certify key %s: read back the certificate: %w", from, err)
	}
	// ReadEntity checks the self-signature: a signer that signed with another key fails there.
	if id := e.PrimaryIdentity(); id == nil || id.SelfSignature == nil {
		return nil, fmt.Errorf("certify key %s: the certificate has no valid self-signature", from)
	}
	return &Key{entity: e, pub: e.PrimaryKey, signer: s, from: from}, nil
}
