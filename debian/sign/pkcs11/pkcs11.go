//go:build cgo

package pkcs11

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ThalesGroup/crypto11"
	p11 "github.com/miekg/pkcs11"

	"github.com/armor-apt/armor/debian/sign"
)

// Signer is a key on a PKCS#11 token.
type Signer struct {
	uri    string // redacted
	ctx    *crypto11.Context
	key    crypto11.Signer
	pub    *rsa.PublicKey
	closed sync.Once
}

var _ sign.Signer = (*Signer)(nil)

// Open loads the module, logs in to the token and finds the key. pin is used when the URI
// carries none (pin-value, pin-source). A wrong PIN gives sign.ErrSignerDenied.
func Open(ctx context.Context, uri string, pin []byte) (*Signer, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	name := redact(uri)
	if !u.HasPIN {
		if len(pin) == 0 {
			return nil, fmt.Errorf("key %s: no PIN: add pin-source=FILE to the URI, or set $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE", name)
		}
		u.PIN = string(pin)
	}
	c, err := crypto11.Configure(&crypto11.Config{
		Path: u.ModulePath, TokenLabel: u.Token, TokenSerial: u.Serial, SlotNumber: u.Slot, Pin: u.PIN,
	})
	if err != nil {
		return nil, classify(name, "open the token", err)
	}
	var label []byte
	if u.Object != "" {
		label = []byte(u.Object)
	}
	key, err := c.FindKeyPair(u.ID, label)
	if err == nil && key == nil {
		err = fmt.Errorf("no key pair with object=%q id=%x on the token", u.Object, u.ID)
	}
	if err != nil {
		c.Close()
		return nil, classify(name, "find the key", err)
	}
	pub, ok := key.Public().(*rsa.PublicKey)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("key %s is a %T key: armor signs with RSA keys on PKCS#11 tokens: %w", name, key.Public(), sign.ErrUnsupportedKey)
	}
	return &Signer{uri: name, ctx: c, key: key, pub: pub}, nil
}

// Public returns the key's public half.
func (s *Signer) Public() crypto.PublicKey { return s.pub }

// Sign has the token make the PKCS#1 v1.5 signature of digest.
func (s *Signer) Sign(ctx context.Context, digest []byte, h crypto.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sig, err := s.key.Sign(rand.Reader, digest, h)
	if err != nil {
		return nil, classify(s.uri, "sign", err)
	}
	return sig, nil
}

// Close logs out and unloads the module.
func (s *Signer) Close() error {
	var err error
	s.closed.Do(func() { err = s.ctx.Close() })
	return err
}

// deniedCodes are the PKCS#11 return values that a retry does not change.
var deniedCodes = []p11.Error{p11.CKR_PIN_INCORRECT, p11.CKR_PIN_INVALID, p11.CKR_PIN_LEN_RANGE, p11.CKR_PIN_LOCKED,
	p11.CKR_PIN_EXPIRED, p11.CKR_USER_PIN_NOT_INITIALIZED, p11.CKR_KEY_FUNCTION_NOT_PERMITTED}

// unavailableCodes are those of a token that is gone or busy.
var unavailableCodes = []p11.Error{p11.CKR_DEVICE_REMOVED, p11.CKR_DEVICE_ERROR, p11.CKR_TOKEN_NOT_PRESENT,
	p11.CKR_SESSION_HANDLE_INVALID, p11.CKR_DEVICE_MEMORY}

func classify(name, doing string, err error) error {
	var code p11.Error
	switch {
	case errors.As(err, &code) && slices.Contains(deniedCodes, code):
		return fmt.Errorf("key %s: %s: %w: %w", name, doing, sign.ErrSignerDenied, err)
	case errors.As(err, &code) && slices.Contains(unavailableCodes, code):
		return fmt.Errorf("key %s: %s: %w: %w", name, doing, sign.ErrSignerUnavailable, err)
	}
	return fmt.Errorf("key %s: %s: %w", name, doing, err)
}
