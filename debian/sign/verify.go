package sign

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

var clearsignBegin = []byte("-----BEGIN PGP SIGNED MESSAGE-----")

const openpgpSigBegin = "-----BEGIN PGP SIGNATURE-----"

// hashByName maps the Hash header values that clearsign.Decode admits to hashes.
var hashByName = map[string]crypto.Hash{
	"MD5": crypto.MD5, "SHA1": crypto.SHA1, "RIPEMD160": crypto.RIPEMD160,
	"SHA224": crypto.SHA224, "SHA256": crypto.SHA256, "SHA384": crypto.SHA384, "SHA512": crypto.SHA512,
	"SHA3-256": crypto.SHA3_256, "SHA3-512": crypto.SHA3_512,
}

// VerifyClearsigned checks a clear-signed message (an InRelease file) against the keys
// in keyrings (each armored or binary public key data). It returns the signed text,
// exactly the bytes that were signed (the Release file), and the fingerprint of the
// signer's primary key (40 uppercase hex digits).
//
// Like apt, it refuses anything but blank lines before the message and after the
// signature, so that no unsigned text can travel with a signed one. A signature by a
// key absent from keyrings gives ErrUnknownKey; a malformed message, altered text, or
// a signature that is otherwise invalid (expired key, revoked key) gives ErrBadSignature.
func VerifyClearsigned(data []byte, keyrings ...[]byte) (plaintext []byte, fingerprint string, err error) {
	keys, err := mergeKeyrings(keyrings)
	if err != nil {
		return nil, "", fmt.Errorf("verify clear-signed message: %w", err)
	}
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), clearsignBegin) {
		return nil, "", fmt.Errorf("verify clear-signed message: %w: text before %s", ErrBadSignature, clearsignBegin)
	}
	block, rest := clearsign.Decode(data)
	if block == nil {
		return nil, "", fmt.Errorf("verify clear-signed message: %w: malformed clear-signed message", ErrBadSignature)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, "", fmt.Errorf("verify clear-signed message: %w: text after the signature", ErrBadSignature)
	}
	sigText := data[max(0, bytes.LastIndex(data, []byte(openpgpSigBegin))):]
	signer, err := verify(keys, block.Bytes, block.ArmoredSignature, sigText, block.Headers.Values("Hash"))
	if err != nil {
		return nil, "", fmt.Errorf("verify clear-signed message: %w", err)
	}
	return block.Plaintext, signer, nil
}

// VerifyDetached checks an armored or binary detached signature (Release.gpg) of signed
// (Release) against the keys in keyrings and returns the signer's primary fingerprint.
// Errors are as for VerifyClearsigned.
func VerifyDetached(signed, sig []byte, keyrings ...[]byte) (fingerprint string, err error) {
	keys, err := mergeKeyrings(keyrings)
	if err != nil {
		return "", fmt.Errorf("verify detached signature: %w", err)
	}
	var sigBlock *armor.Block
	var armored []byte
	if t := bytes.TrimLeft(sig, " \t\r\n"); len(t) > 0 && t[0]&0x80 == 0 {
		armored = sig
		sigBlock, err = armor.Decode(bytes.NewReader(sig))
		if err != nil {
			return "", fmt.Errorf("verify detached signature: %w: decode armor: %v", ErrBadSignature, err)
		}
	} else {
		sigBlock = &armor.Block{Type: openpgp.SignatureType, Body: bytes.NewReader(sig)}
	}
	fp, err := verify(keys, signed, sigBlock, armored, nil)
	if err != nil {
		return "", fmt.Errorf("verify detached signature: %w", err)
	}
	return fp, nil
}

// verify checks the signature in sig over signed against keys. armored is the text of
// sig when it is armored, for the CRC check, else nil. hashNames are the clear-signed
// message's Hash headers: when there are some, the signature must use one of them, as
// gpg requires.
func verify(keys openpgp.EntityList, signed []byte, sig *armor.Block, armored []byte, hashNames []string) (string, error) {
	if sig.Type != openpgp.SignatureType {
		return "", fmt.Errorf("%w: armored block is a %q, want %q", ErrBadSignature, sig.Type, openpgp.SignatureType)
	}
	body, err := io.ReadAll(sig.Body)
	if err != nil {
		return "", fmt.Errorf("%w: decode signature: %w", ErrBadSignature, err)
	}
	if armored != nil {
		if err := checkArmorCRC(armored, body); err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadSignature, err)
		}
	}
	if err := hasSignaturePacket(body); err != nil {
		return "", err
	}
	var signer *openpgp.Entity
	if len(hashNames) > 0 {
		var hashes []crypto.Hash
		for _, n := range hashNames {
			if h, ok := hashByName[n]; ok {
				hashes = append(hashes, h)
			}
		}
		_, signer, err = openpgp.VerifyDetachedSignatureAndHash(keys, bytes.NewReader(signed), bytes.NewReader(body), hashes, nil)
	} else {
		_, signer, err = openpgp.VerifyDetachedSignature(keys, bytes.NewReader(signed), bytes.NewReader(body), nil)
	}
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return "", ErrUnknownKey
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrBadSignature, err)
	case signer == nil:
		return "", ErrBadSignature
	}
	return fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint), nil
}

// hasSignaturePacket tells an empty or garbled signature (ErrBadSignature) apart from a
// good one by an unknown key (ErrUnknownKey), which go-crypto reports alike.
func hasSignaturePacket(body []byte) error {
	p, err := packet.NewReader(bytes.NewReader(body)).Next()
	if err != nil {
		return fmt.Errorf("%w: read signature packet: %w", ErrBadSignature, err)
	}
	if _, ok := p.(*packet.Signature); !ok {
		return fmt.Errorf("%w: first packet is a %T, not a signature", ErrBadSignature, p)
	}
	return nil
}
