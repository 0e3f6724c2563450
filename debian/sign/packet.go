package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// armor writes v4 signature packets itself (RFC 4880, section 5.2.3) around the raw
// signature a Signer returns. go-crypto's Signature.Sign cannot do it: it signs EdDSA only
// with the secret key in memory, it drops the error of a crypto.Signer that fails (the RSA
// branch shadows it), and it adds a random salt notation unless told otherwise. Parsing
// and verifying stay with go-crypto: every packet built here is read back and checked by
// it before it is returned.

// OpenPGP algorithm numbers (RFC 4880, sections 9.1 and 9.4).
var hashIDs = map[crypto.Hash]byte{crypto.SHA256: 8, crypto.SHA384: 9, crypto.SHA512: 10}

// Signature subpacket types (RFC 4880, section 5.2.3.1).
const (
	subCreationTime   = 2
	subIssuer         = 16
	subPreferredHash  = 21
	subKeyFlags       = 27
	subFeatures       = 30
	subIssuerFingerpr = 33
)

type subpacket struct {
	typ  byte
	data []byte
}

// sigSpec is what a signature says besides what it signs.
type sigSpec struct {
	typ   packet.SignatureType
	hash  crypto.Hash
	at    time.Time   // creation time, to the second
	extra []subpacket // hashed, after the issuer fingerprint and the creation time
}

// signPacket returns a v4 signature packet made by s, the signer of pub, over what write
// feeds the hash. The packet carries, as gpg's do, the issuer fingerprint and the creation
// time in the hashed area and the issuer key ID in the unhashed one.
func signPacket(ctx context.Context, s Signer, pub *packet.PublicKey, spec sigSpec, write func(io.Writer) error) ([]byte, error) {
	hid, ok := hashIDs[spec.hash]
	if !ok {
		return nil, fmt.Errorf("unsupported hash %v (want SHA256, SHA384 or SHA512)", spec.hash)
	}
	var created [4]byte
	binary.BigEndian.PutUint32(created[:], uint32(spec.at.Unix()))
	hashed := encodeSubpackets(append([]subpacket{
		{subIssuerFingerpr, append([]byte{4}, pub.Fingerprint...)},
		{subCreationTime, created[:]},
	}, spec.extra...))
	var keyID [8]byte
	binary.BigEndian.PutUint64(keyID[:], pub.KeyId)
	unhashed := encodeSubpackets([]subpacket{{subIssuer, keyID[:]}})
	if len(hashed) > 0xffff || len(unhashed) > 0xffff {
		return nil, errors.New("signature subpackets too long")
	}

	head := []byte{4, byte(spec.typ), byte(pub.PubKeyAlgo), hid}
	head = binary.BigEndian.AppendUint16(head, uint16(len(hashed)))
	head = append(head, hashed...)
	h := spec.hash.New()
	if err := write(h); err != nil {
		return nil, err
	}
	h.Write(head)
	h.Write([]byte{4, 0xff})
	binary.Write(h, binary.BigEndian, uint32(len(head)))
	digest := h.Sum(nil)

	raw, err := s.Sign(ctx, digest, spec.hash)
	if err != nil {
		return nil, err
	}
	mpis, err := signatureMPIs(pub.PubKeyAlgo, raw)
	if err != nil {
		return nil, err
	}
	body := append(head, byte(len(unhashed)>>8), byte(len(unhashed)))
	body = append(body, unhashed...)
	body = append(body, digest[:2]...)
	body = append(body, mpis...)
	return appendPacket(nil, 2, body), nil
}

// signatureMPIs encodes a raw signature as the algorithm-specific fields of a signature
// packet.
func signatureMPIs(algo packet.PublicKeyAlgorithm, raw []byte) ([]byte, error) {
	switch algo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		return appendMPI(nil, raw), nil
	case packet.PubKeyAlgoEdDSA:
		if len(raw) != ed25519.SignatureSize {
			return nil, fmt.Errorf("Ed25519 signature of %d bytes, want %d", len(raw), ed25519.SignatureSize)
		}
		return appendMPI(appendMPI(nil, raw[:32]), raw[32:]), nil
	case packet.PubKeyAlgoECDSA:
		var rs struct{ R, S *big.Int }
		if rest, err := asn1.Unmarshal(raw, &rs); err != nil || len(rest) > 0 {
			return nil, fmt.Errorf("ECDSA signature is not a DER sequence of r and s: %v", err)
		}
		return appendMPI(appendMPI(nil, rs.R.Bytes()), rs.S.Bytes()), nil
	}
	return nil, fmt.Errorf("public-key algorithm %d: %w", algo, ErrUnsupportedKey)
}

func encodeSubpackets(sps []subpacket) []byte {
	var out []byte
	for _, sp := range sps {
		out = appendLength(out, 1+len(sp.data))
		out = append(out, sp.typ)
		out = append(out, sp.data...)
	}
	return out
}

// appendLength appends an OpenPGP new-format length (RFC 4880, section 4.2.2).
func appendLength(b []byte, n int) []byte {
	switch {
	case n < 192:
		return append(b, byte(n))
	case n < 8384:
		n -= 192
		return append(b, byte(n>>8)+192, byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xff), uint32(n))
}

// appendPacket appends a packet with a new-format header.
func appendPacket(b []byte, tag byte, body []byte) []byte {
	b = append(b, 0xc0|tag)
	b = appendLength(b, len(body))
	return append(b, body...)
}

// appendMPI appends an unsigned big-endian integer as an MPI: its bit length, then its
// bytes without leading zeros.
func appendMPI(b, n []byte) []byte {
	for len(n) > 0 && n[0] == 0 {
		n = n[1:]
	}
	bitLen := 0
	if len(n) > 0 {
		bitLen = 8*(len(n)-1) + bits.Len8(n[0])
	}
	b = binary.BigEndian.AppendUint16(b, uint16(bitLen))
	return append(b, n...)
}

// ed25519OID is the curve OID of legacy EdDSA keys (RFC 4880bis, section 9.2).
var ed25519OID = []byte{0x2b, 0x06, 0x01, 0x04, 0x01, 0xda, 0x47, 0x0f, 0x01}

// publicKeyPacket returns the v4 OpenPGP public key of a signer's public half, created at
// created (to the second): RSA (algorithm 1) or legacy EdDSA over Ed25519 (algorithm 22),
// the forms apt in Debian 12 accepts. The fingerprint depends on created, which is why it
// is kept with the public key rather than taken from the clock.
func publicKeyPacket(pub crypto.PublicKey, created time.Time) (*packet.PublicKey, error) {
	created = created.Truncate(time.Second)
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return packet.NewRSAPublicKey(created, k), nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("Ed25519 public key of %d bytes", len(k))
		}
		body := []byte{4}
		body = binary.BigEndian.AppendUint32(body, uint32(created.Unix()))
		body = append(body, byte(packet.PubKeyAlgoEdDSA), byte(len(ed25519OID)))
		body = append(body, ed25519OID...)
		body = appendMPI(body, append([]byte{0x40}, k...))
		p, err := packet.Read(bytes.NewReader(appendPacket(nil, 6, body)))
		if err != nil {
			return nil, fmt.Errorf("EdDSA public key: %w", err)
		}
		return p.(*packet.PublicKey), nil
	case *ecdsa.PublicKey:
		return nil, fmt.Errorf("ECDSA keys can sign from a key file only; use an RSA or Ed25519 key: %w", ErrUnsupportedKey)
	}
	return nil, fmt.Errorf("%T public key: %w", pub, ErrUnsupportedKey)
}

// sameKey reports whether pk holds the public half pub.
func sameKey(pk *packet.PublicKey, pub crypto.PublicKey) bool {
	made, err := publicKeyPacket(pub, pk.CreationTime)
	return err == nil && bytes.Equal(made.Fingerprint, pk.Fingerprint)
}
