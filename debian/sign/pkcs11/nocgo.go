//go:build !cgo

package pkcs11

import (
	"context"
	"crypto"
	"errors"
)

// Signer is a key on a PKCS#11 token; this build has none.
type Signer struct{}

// Open fails: PKCS#11 modules are C libraries, which a build without cgo cannot load.
func Open(ctx context.Context, uri string, pin []byte) (*Signer, error) {
	if _, err := ParseURI(uri); err != nil {
		return nil, err
	}
	return nil, errors.New("pkcs11: keys need an armor built with cgo (CGO_ENABLED=1), which loads the PKCS#11 module")
}

func (s *Signer) Public() crypto.PublicKey { return nil }
func (s *Signer) Sign(context.Context, []byte, crypto.Hash) ([]byte, error) {
	return nil, errors.ErrUnsupported
}
func (s *Signer) Close() error { return nil }
