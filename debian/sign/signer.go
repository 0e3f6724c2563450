package sign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	pgpecdsa "github.com/ProtonMail/go-crypto/openpgp/ecdsa"
	"github.com/ProtonMail/go-crypto/openpgp/eddsa"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Signer makes the raw signatures of one signing key, wherever its secret half lives: in
// this process (a key file), on a PKCS#11 token, in a cloud KMS or behind gpg-agent. armor
// builds the OpenPGP packets around what it returns, so a backend only has to sign a
// digest, the one operation every HSM and KMS offers.
//
// Public returns the public half: *rsa.PublicKey, ed25519.PublicKey or *ecdsa.PublicKey.
// It does not change over the Signer's life and costs no round trip (a backend fetches it
// when it is opened).
//
// Sign returns the raw signature of digest, which is the hash h (SHA-256, SHA-384 or
// SHA-512) of what is signed:
//   - RSA: the PKCS#1 v1.5 signature of the DigestInfo of h and digest, as many bytes as
//     the modulus;
//   - Ed25519: the 64-byte signature of digest itself as the message (OpenPGP's EdDSA
//     signs the digest);
//   - ECDSA: the ASN.1 DER sequence of r and s, as crypto.Signer returns it.
//
// RSA and Ed25519 signatures are deterministic, so the same digest gives the same bytes.
//
// Errors: an error means no signature was made, and it names the key. It wraps ctx's
// error when ctx ends first, ErrSignerUnavailable when the backend could not be reached or
// kept refusing for the moment (network down, throttled beyond the backend's own retries)
// so that trying again later may work, and ErrSignerDenied when the backend refused the
// key's use (wrong PIN, access denied, key disabled), which trying again will not change.
// Other errors are a misconfiguration or a bug. armor verifies every signature against
// Public before it writes it, so a backend that signs with another key than it names is
// caught rather than published.
//
// A Signer is safe for concurrent use. One that holds resources (a loaded PKCS#11 module,
// a socket) also implements io.Closer.
type Signer interface {
	Public() crypto.PublicKey
	Sign(ctx context.Context, digest []byte, h crypto.Hash) ([]byte, error)
}

// Errors of a Signer, for callers to match with errors.Is.
var (
	ErrSignerUnavailable = errors.New("signing key unavailable")
	ErrSignerDenied      = errors.New("signing key refused to sign")
	// ErrKeyMismatch: the key a signer holds is not the OpenPGP key it is supposed to be
	// (the one in the repository's published keyring).
	ErrKeyMismatch = errors.New("signing key is not the published key")
)

// fileSigner signs with a secret key read from a key file, in this process.
type fileSigner struct {
	priv *packet.PrivateKey
	pub  crypto.PublicKey
}

var _ Signer = (*fileSigner)(nil)

// newFileSigner wraps a decrypted OpenPGP secret key.
func newFileSigner(priv *packet.PrivateKey) (*fileSigner, error) {
	switch k := priv.PrivateKey.(type) {
	case *rsa.PrivateKey:
		return &fileSigner{priv: priv, pub: &k.PublicKey}, nil
	case *eddsa.PrivateKey:
		return &fileSigner{priv: priv, pub: ed25519.PublicKey(k.PublicKey.X)}, nil
	case *pgpecdsa.PrivateKey:
		curve, err := nistCurve(&priv.PublicKey)
		if err != nil {
			return nil, err
		}
		return &fileSigner{priv: priv, pub: &ecdsa.PublicKey{Curve: curve, X: k.X, Y: k.Y}}, nil
	}
	return nil, fmt.Errorf("secret key %X: %T keys cannot sign here: %w", priv.Fingerprint, priv.PrivateKey, ErrUnsupportedKey)
}

// nistCurve returns the NIST curve of an ECDSA key; other curves are not supported.
func nistCurve(pk *packet.PublicKey) (elliptic.Curve, error) {
	c, err := pk.Curve()
	if err != nil {
		return nil, fmt.Errorf("key %X: %w", pk.Fingerprint, err)
	}
	switch c {
	case packet.CurveNistP256:
		return elliptic.P256(), nil
	case packet.CurveNistP384:
		return elliptic.P384(), nil
	case packet.CurveNistP521:
		return elliptic.P521(), nil
	}
	return nil, fmt.Errorf("ECDSA key %X on curve %s: only the NIST curves can sign here: %w", pk.Fingerprint, c, ErrUnsupportedKey)
}

func (s *fileSigner) Public() crypto.PublicKey { return s.pub }

func (s *fileSigner) Sign(ctx context.Context, digest []byte, h crypto.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch k := s.priv.PrivateKey.(type) {
	case *rsa.PrivateKey:
		return rsa.SignPKCS1v15(nil, k, h, digest)
	case *eddsa.PrivateKey:
		r, sv, err := eddsa.Sign(k, digest)
		if err != nil {
			return nil, err
		}
		return append(pad(r, 32), pad(sv, 32)...), nil
	case *pgpecdsa.PrivateKey:
		r, sv, err := pgpecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			return nil, err
		}
		return asn1.Marshal(struct{ R, S *big.Int }{r, sv})
	}
	return nil, fmt.Errorf("sign with %T: %w", s.priv.PrivateKey, ErrUnsupportedKey)
}

// pad left-pads b with zeros to n bytes.
func pad(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b)), b...)
}
