// Package keyuri opens the signer a key URI names, in the forms cosign's users write:
//
//	pkcs11:token=T;object=O?module-path=M[&pin-source=FILE]   a PKCS#11 token (RFC 7512)
//	awskms://[ENDPOINT]/KEY-ID-OR-ALIAS                      AWS KMS
//	gpg-agent:FINGERPRINT                                     a key gpg-agent holds (also on a smartcard)
//	gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N
//
// gcpkms:// is recognised and refused: no Cloud KMS server or emulator could be had to
// test it against (the module proxy serves none), and armor ships no signer it has not
// run against the real protocol.
package keyuri

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/debian/sign/awskms"
	"github.com/armor-apt/armor/debian/sign/gpgagent"
	"github.com/armor-apt/armor/debian/sign/pkcs11"
)

// ErrUnsupported is the error for a key URI form armor recognises but cannot sign with.
var ErrUnsupported = errors.New("key URI form not supported")

// Open opens the Signer uri names. pin is the secret the caller holds for it: a PKCS#11
// user PIN when the URI carries none. Errors are as sign.Signer's, and name the key
// without its PIN.
func Open(ctx context.Context, uri string, pin []byte) (sign.Signer, error) {
	uri = strings.TrimSpace(uri)
	switch {
	case strings.HasPrefix(uri, "pkcs11:"):
		return pkcs11.Open(ctx, uri, pin)
	case strings.HasPrefix(uri, "awskms://"):
		return awskms.Open(ctx, uri)
	case strings.HasPrefix(uri, "gpg-agent:"):
		return gpgagent.Open(ctx, uri)
	case strings.HasPrefix(uri, "gcpkms://"):
		return nil, fmt.Errorf("key %s: Google Cloud KMS keys are not supported yet (no Cloud KMS server or emulator was available to test against); use pkcs11: with Google's Cloud KMS PKCS#11 library, or awskms://, gpg-agent: or a key file: %w", uri, ErrUnsupported)
	}
	return nil, fmt.Errorf("%q is not a key URI (pkcs11:, awskms://, gpg-agent:)", Redact(uri))
}

// Certificate returns the OpenPGP certificate the signer's own backend keeps (gpg's
// keyring for gpg-agent), or nil when the repository's published key is the only one.
func Certificate(s sign.Signer) []byte {
	if c, ok := s.(interface{ Certificate() []byte }); ok {
		return c.Certificate()
	}
	return nil
}

// Redact hides a PIN that a key URI carries (pkcs11: pin-value), for messages.
func Redact(uri string) string { return pkcs11.Redact(uri) }

// HasSecret reports whether the URI itself carries a secret (a pkcs11: pin-value), which
// must not come from a flag.
func HasSecret(uri string) bool { return Redact(uri) != uri }
