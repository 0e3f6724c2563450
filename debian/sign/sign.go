package sign

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// signConfig returns the configuration for one signature made at time at (truncated to
// seconds, as OpenPGP stores it) with hash h. A time before the key's creation becomes the
// creation time: gpgv and apt refuse a signature older than its key, and the result is
// still a function of the key and at.
//
// It turns off go-crypto's salt notation (salt@notations.openpgpjs.org), a random value it
// otherwise adds to every v4 signature. Without it a signature is a function of the key,
// the signed text, the hash and the signing time (RSA PKCS#1 v1.5 and EdDSA are
// deterministic), so two builds of one Release give byte-identical InRelease and
// Release.gpg. The salt guards EdDSA against fault attacks on the signing machine; a
// repository's reproducible output is worth more here, and gpg does not salt either.
func (k *Key) signConfig(h crypto.Hash, at time.Time) (*packet.Config, error) {
	switch h {
	case 0:
		h = crypto.SHA512
	case crypto.SHA256, crypto.SHA384, crypto.SHA512:
	default:
		return nil, fmt.Errorf("sign: unsupported hash %v (want SHA256, SHA384 or SHA512)", h)
	}
	at = at.Truncate(time.Second)
	if created := k.signer.PublicKey.CreationTime; at.Before(created) {
		at = created
	}
	return &packet.Config{
		DefaultHash:                           h,
		Time:                                  func() time.Time { return at },
		SigningKeyId:                          k.signer.PublicKey.KeyId,
		NonDeterministicSignaturesViaNotation: new(false),
	}, nil
}

// Clearsign returns data clear-signed, as an InRelease file holds Release. hash is
// crypto.SHA256, SHA384 or SHA512 (zero means SHA512). The signature is made now; use
// SignRelease for one made at a given time.
//
// The text that gpgv, apt and VerifyClearsigned recover from the result is exactly data:
// data must therefore not contain carriage returns or trailing spaces or tabs on a line,
// which clear-signing cannot carry; such data is refused rather than signed altered.
// The signature block carries a CRC24 line, which gpgv 2.2 needs.
func (k *Key) Clearsign(data []byte, hash crypto.Hash) ([]byte, error) {
	return k.clearsign(data, hash, time.Now())
}

func (k *Key) clearsign(data []byte, hash crypto.Hash, at time.Time) ([]byte, error) {
	if err := checkClearsignable(data); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	cfg, err := k.signConfig(hash, at)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	w, err := clearsign.Encode(&raw, k.signer.PrivateKey, cfg)
	if err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	return rearmor(raw.Bytes())
}

// clearsignMulti clear-signs data with every key, in order, in one signature block.
func clearsignMulti(keys []*Key, data []byte, hash crypto.Hash, at time.Time) ([]byte, error) {
	if err := checkClearsignable(data); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	var cfg *packet.Config // the latest of the keys' times: none signs before it existed
	for _, k := range keys {
		c, err := k.signConfig(hash, at)
		if err != nil {
			return nil, err
		}
		if cfg == nil || c.Now().After(cfg.Now()) {
			cfg = c
		}
	}
	cfg.SigningKeyId = 0 // each key signs with its own signer below
	signers := make([]*packet.PrivateKey, len(keys))
	for i, k := range keys {
		signers[i] = k.signer.PrivateKey
	}
	var raw bytes.Buffer
	w, err := clearsign.EncodeMulti(&raw, signers, cfg)
	if err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	return rearmor(raw.Bytes())
}

// sigBegin starts the signature block of a clear-signed message. Text lines that start
// with "-" are dash-escaped, so the last occurrence at a line start is the real one.
var sigBegin = []byte("\n-----BEGIN PGP SIGNATURE-----\n")

// rearmor rewrites the signature block of a clear-signed message with a CRC24 line.
// clearsign.Encode omits it, and gpgv 2.2 then rejects signatures whose base64 has no
// padding.
func rearmor(msg []byte) ([]byte, error) {
	i := bytes.LastIndex(msg, sigBegin)
	if i < 0 {
		return nil, errors.New("clearsign: no signature block in output")
	}
	block, err := armor.Decode(bytes.NewReader(msg[i+1:]))
	if err != nil {
		return nil, fmt.Errorf("clearsign: decode signature block: %w", err)
	}
	var sig bytes.Buffer
	if _, err := sig.ReadFrom(block.Body); err != nil {
		return nil, fmt.Errorf("clearsign: decode signature block: %w", err)
	}
	out := bytes.NewBuffer(make([]byte, 0, len(msg)+8))
	out.Write(msg[:i+1])
	if err := writeArmored(out, openpgp.SignatureType, sig.Bytes()); err != nil {
		return nil, fmt.Errorf("clearsign: %w", err)
	}
	return out.Bytes(), nil
}

// checkClearsignable refuses text that a clear-signed message cannot carry unchanged.
func checkClearsignable(data []byte) error {
	line := 1
	for i, c := range data {
		switch c {
		case '\r':
			return fmt.Errorf("line %d contains a carriage return, which clear-signing drops", line)
		case '\n':
			if i > 0 && (data[i-1] == ' ' || data[i-1] == '\t') {
				return fmt.Errorf("line %d ends with whitespace, which clear-signing drops", line)
			}
			line++
		}
	}
	if n := len(data); n > 0 && (data[n-1] == ' ' || data[n-1] == '\t') {
		return fmt.Errorf("line %d ends with whitespace, which clear-signing drops", line)
	}
	return nil
}

// DetachSign returns an armored detached signature of data made now, as Release.gpg
// holds for Release, with a CRC24 line. hash is as for Clearsign.
func (k *Key) DetachSign(data []byte, hash crypto.Hash) ([]byte, error) {
	cfg, err := k.signConfig(hash, time.Now())
	if err != nil {
		return nil, err
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, k.entity, bytes.NewReader(data), cfg); err != nil {
		return nil, fmt.Errorf("detach sign: %w", err)
	}
	var out bytes.Buffer
	if err := writeArmored(&out, openpgp.SignatureType, sig.Bytes()); err != nil {
		return nil, fmt.Errorf("detach sign: %w", err)
	}
	return out.Bytes(), nil
}

// SignRelease returns the InRelease and Release.gpg of a Release file from ONE signature
// made at time at (the Release's Date): a text-mode signature over data, clear-signed into
// InRelease and the same signature armored alone as Release.gpg. Verifiers canonicalise
// line endings for a text signature of a detached file, so gpgv, sqv and apt accept it;
// and a build makes one private-key operation per suite instead of two.
//
// The output is a function of the key, data, hash and at (to the second): signing the
// same Release again gives the same bytes. A time before the key's creation signs at the
// creation time, since gpgv and apt refuse a signature older than its key.
func (k *Key) SignRelease(ctx context.Context, data []byte, hash crypto.Hash, at time.Time) (inRelease, detached []byte, err error) {
	return SignRelease(ctx, []*Key{k}, data, hash, at)
}

// SignRelease is Key.SignRelease with several keys: InRelease and Release.gpg carry one
// signature by each, which apt accepts when it trusts any of the keys. That is how a
// repository changes keys: during an overlap it signs with the old key and the new one,
// until its users have the new key.
func SignRelease(ctx context.Context, keys []*Key, data []byte, hash crypto.Hash, at time.Time) (inRelease, detached []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("sign release: %w", err)
	}
	switch len(keys) {
	case 0:
		return nil, nil, errors.New("sign release: no key")
	case 1:
		inRelease, err = keys[0].clearsign(data, hash, at)
	default:
		inRelease, err = clearsignMulti(keys, data, hash, at)
	}
	if err != nil {
		return nil, nil, err
	}
	i := bytes.LastIndex(inRelease, sigBegin)
	if i < 0 {
		return nil, nil, errors.New("sign release: no signature block in InRelease")
	}
	return inRelease, inRelease[i+1:], nil
}
