package sign

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

var (
	armorBegin = []byte("-----BEGIN PGP ")
	armorEnd   = []byte("-----END PGP ")
)

// ReadKeyring parses public keys, armored or binary, possibly several concatenated (also
// several armored blocks one after the other). Secret keys are accepted and read as
// keys too. It fails if no key can be read.
func ReadKeyring(data []byte) (openpgp.EntityList, error) {
	list, err := readEntities(data)
	if err != nil {
		return nil, fmt.Errorf("read keyring: %w", err)
	}
	return list, nil
}

// InKeyring reports whether signatures by k verify against keyring (public keys,
// armored or binary, as ReadKeyring reads them): it holds k's primary key and, valid now,
// the key that signs (a signing subkey too, when that is what signs). It also returns the
// primary fingerprints the keyring holds, for an error message. The error is for a
// keyring that cannot be read.
func (k *Key) InKeyring(keyring []byte) (ok bool, fingerprints []string, err error) {
	list, err := ReadKeyring(keyring)
	if err != nil {
		return false, nil, err
	}
	for _, e := range list {
		fingerprints = append(fingerprints, fmt.Sprintf("%X", e.PrimaryKey.Fingerprint))
		if !bytes.Equal(e.PrimaryKey.Fingerprint, k.entity.PrimaryKey.Fingerprint) {
			continue
		}
		if pub, found := e.SigningKeyById(time.Now(), k.pub.KeyId); found &&
			bytes.Equal(pub.PublicKey.Fingerprint, k.pub.Fingerprint) {
			ok = true
		}
	}
	return ok, fingerprints, nil
}

// readEntities reads every key in data, armored or binary.
func readEntities(data []byte) (openpgp.EntityList, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("no key data")
	}
	// Every OpenPGP packet starts with a byte whose high bit is set; armor is ASCII.
	if trimmed[0]&0x80 != 0 {
		return readBinary(trimmed)
	}
	var list openpgp.EntityList
	rest := trimmed
	for {
		start := indexLineStart(rest, armorBegin)
		if start < 0 {
			break
		}
		rest = rest[start:]
		end := bytes.Index(rest, armorEnd)
		if end < 0 {
			return nil, errors.New("armored block has no END line")
		}
		if nl := bytes.IndexByte(rest[end:], '\n'); nl >= 0 {
			end += nl + 1
		} else {
			end = len(rest)
		}
		el, err := readArmoredBlock(rest[:end])
		if err != nil {
			return nil, err
		}
		list = append(list, el...)
		rest = rest[end:]
	}
	if len(list) == 0 {
		return nil, errors.New("no armored OpenPGP key block found")
	}
	return list, nil
}

// indexLineStart returns the index of the first occurrence of sep in b that starts a line.
func indexLineStart(b, sep []byte) int {
	off := 0
	for {
		i := bytes.Index(b[off:], sep)
		if i < 0 {
			return -1
		}
		if off+i == 0 || b[off+i-1] == '\n' {
			return off + i
		}
		off += i + 1
	}
}

func readArmoredBlock(block []byte) (openpgp.EntityList, error) {
	b, err := armor.Decode(bytes.NewReader(block))
	if err != nil {
		return nil, fmt.Errorf("decode armor: %w", err)
	}
	if b.Type != openpgp.PublicKeyType && b.Type != openpgp.PrivateKeyType {
		return nil, fmt.Errorf("armored block is a %q, want a public or private key block", b.Type)
	}
	body, err := io.ReadAll(b.Body)
	if err != nil {
		return nil, fmt.Errorf("decode armored %s: %w", b.Type, err)
	}
	if err := checkArmorCRC(block, body); err != nil {
		return nil, fmt.Errorf("decode armored %s: %w", b.Type, err)
	}
	return readBinary(body)
}

func readBinary(data []byte) (openpgp.EntityList, error) {
	list, err := openpgp.ReadKeyRing(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse OpenPGP keys: %w", err)
	}
	if len(list) == 0 {
		return nil, errors.New("no OpenPGP key found")
	}
	return list, nil
}

// mergeKeyrings reads each keyring and concatenates their keys.
func mergeKeyrings(keyrings [][]byte) (openpgp.EntityList, error) {
	if len(keyrings) == 0 {
		return nil, errors.New("no keyring given")
	}
	var all openpgp.EntityList
	for i, kr := range keyrings {
		list, err := readEntities(kr)
		if err != nil {
			return nil, fmt.Errorf("read keyring %d: %w", i+1, err)
		}
		all = append(all, list...)
	}
	return all, nil
}
