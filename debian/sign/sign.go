package sign

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// hashNames are the Hash header values of a clear-signed message (RFC 4880, section 9.4).
var hashNames = map[crypto.Hash]string{crypto.SHA256: "SHA256", crypto.SHA384: "SHA384", crypto.SHA512: "SHA512"}

// checkHash applies the default (SHA512) and refuses other hashes than SHA-2's.
func checkHash(h crypto.Hash) (crypto.Hash, error) {
	if h == 0 {
		return crypto.SHA512, nil
	}
	if _, ok := hashNames[h]; !ok {
		return 0, fmt.Errorf("sign: unsupported hash %v (want SHA256, SHA384 or SHA512)", h)
	}
	return h, nil
}

// signText returns k's binary signature of text: a v4 text signature (type 0x01) made at
// time at (truncated to seconds; a time before the key's creation becomes the creation
// time, since gpgv and apt refuse a signature older than its key).
//
// The signature is a function of the key, text, hash and at: armor adds no random salt
// notation (go-crypto's default adds salt@notations.openpgpjs.org), and RSA PKCS#1 v1.5
// and EdDSA are deterministic, so two builds of one Release give byte-identical InRelease
// and Release.gpg. The salt guards EdDSA against fault attacks on the signing machine; a
// repository's reproducible output is worth more here, and gpg does not salt either.
//
// Before it returns, the signature is verified with go-crypto against k's public key, so
// a backend that signed with another key, or garbled its answer, fails here.
func (k *Key) signText(ctx context.Context, text []byte, h crypto.Hash, at time.Time) ([]byte, error) {
	at = at.Truncate(time.Second)
	if created := k.pub.CreationTime; at.Before(created) {
		at = created
	}
	write := func(w io.Writer) error { return writeCanonical(w, text) }
	sig, err := signPacket(ctx, k.signer, k.pub, sigSpec{typ: packet.SigTypeText, hash: h, at: at}, write)
	if err != nil {
		return nil, fmt.Errorf("sign with %s: %w", k.describe(), err)
	}
	if err := checkPacket(k.pub, sig, write); err != nil {
		return nil, fmt.Errorf("sign with %s: the signature it made does not verify against key %X (does the key URI name another key?): %w",
			k.describe(), k.pub.Fingerprint, err)
	}
	return sig, nil
}

// checkPacket verifies a signature packet made by pub over what write feeds.
func checkPacket(pub *packet.PublicKey, sigPacket []byte, write func(io.Writer) error) error {
	p, err := packet.Read(bytes.NewReader(sigPacket))
	if err != nil {
		return fmt.Errorf("read back the signature: %w", err)
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return fmt.Errorf("read back a %T, not a signature", p)
	}
	h := sig.Hash.New()
	if err := write(h); err != nil {
		return err
	}
	return pub.VerifySignature(h, sig)
}

// writeCanonical writes text with its line endings as CR LF, the form text signatures
// hash (RFC 4880, section 5.2.1). checkClearsignable has refused carriage returns.
func writeCanonical(w io.Writer, text []byte) error {
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			_, err := w.Write(text)
			return err
		}
		if _, err := w.Write(text[:i]); err != nil {
			return err
		}
		if _, err := w.Write([]byte("\r\n")); err != nil {
			return err
		}
		text = text[i+1:]
	}
	return nil
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
	in, _, err := SignRelease(context.Background(), []*Key{k}, data, hash, time.Now())
	return in, err
}

// DetachSign returns an armored detached signature of data made now, as Release.gpg
// holds for Release, with a CRC24 line. hash is as for Clearsign.
func (k *Key) DetachSign(data []byte, hash crypto.Hash) ([]byte, error) {
	_, det, err := SignRelease(context.Background(), []*Key{k}, data, hash, time.Now())
	return det, err
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
// signature by each, in order, which apt accepts when it trusts any of the keys. That is
// how a repository changes keys: during an overlap it signs with the old key and the new
// one, until its users have the new key.
func SignRelease(ctx context.Context, keys []*Key, data []byte, hash crypto.Hash, at time.Time) (inRelease, detached []byte, err error) {
	if len(keys) == 0 {
		return nil, nil, errors.New("sign release: no key")
	}
	if err := checkClearsignable(data); err != nil {
		return nil, nil, fmt.Errorf("clearsign: %w", err)
	}
	if hash, err = checkHash(hash); err != nil {
		return nil, nil, err
	}
	var sigs []byte
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("sign release: %w", err)
		}
		sig, err := k.signText(ctx, data, hash, at)
		if err != nil {
			return nil, nil, err
		}
		sigs = append(sigs, sig...)
	}
	var block bytes.Buffer
	if err := writeArmored(&block, openpgp.SignatureType, sigs); err != nil {
		return nil, nil, fmt.Errorf("sign release: %w", err)
	}
	var msg bytes.Buffer
	msg.Grow(len(data) + len(data)/16 + block.Len() + 64)
	fmt.Fprintf(&msg, "-----BEGIN PGP SIGNED MESSAGE-----\nHash: %s\n\n", hashNames[hash])
	writeDashEscaped(&msg, data)
	msg.WriteByte('\n')
	msg.Write(block.Bytes())
	return msg.Bytes(), block.Bytes(), nil
}

// writeDashEscaped writes the text of a clear-signed message: each line that starts with
// a dash gets "- " before it (RFC 4880, section 7.1).
func writeDashEscaped(w *bytes.Buffer, text []byte) {
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, "-") {
			w.WriteString("- ")
		}
		w.WriteString(line)
	}
}
