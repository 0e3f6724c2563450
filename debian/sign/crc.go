package sign

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// go-crypto's armor reader skips the CRC24 line without checking it, but gpgv 2.2 (and so
// apt) rejects a block whose CRC does not match. checkArmorCRC applies gpgv's rule so that
// what we accept is what apt accepts.

const (
	crc24Init = 0xb704ce
	crc24Poly = 0x1864cfb
)

// crc24 computes the OpenPGP armor checksum of data (RFC 4880, section 6.1).
func crc24(data []byte) uint32 {
	crc := uint32(crc24Init)
	for _, b := range data {
		crc ^= uint32(b) << 16
		for range 8 {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= crc24Poly
			}
		}
	}
	return crc & 0xffffff
}

var errBadCRC = errors.New("armor checksum (CRC24) does not match")

// checkArmorCRC checks the CRC24 line of the first armored block in armored, if it has one,
// against body, the block's decoded content.
func checkArmorCRC(armored, body []byte) error {
	var prev []byte
	for line := range bytes.Lines(armored) {
		line = bytes.TrimSpace(line)
		if bytes.HasPrefix(line, []byte("-----END ")) {
			break
		}
		if len(line) > 0 {
			prev = line
		}
	}
	if len(prev) != 5 || prev[0] != '=' {
		return nil // no CRC line
	}
	sum, err := base64.StdEncoding.DecodeString(string(prev[1:]))
	if err != nil || len(sum) != 3 {
		return fmt.Errorf("%w: malformed line %q", errBadCRC, prev)
	}
	if want := uint32(sum[0])<<16 | uint32(sum[1])<<8 | uint32(sum[2]); crc24(body) != want {
		return errBadCRC
	}
	return nil
}
