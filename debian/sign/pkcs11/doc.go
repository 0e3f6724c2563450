// Package pkcs11 signs with an RSA key on a PKCS#11 token (an HSM, a smartcard, SoftHSM),
// named by an RFC 7512 URI as cosign takes it:
//
//	pkcs11:token=release;object=archive-key?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=/run/secrets/pin
//
// The path part selects the token (token=LABEL, serial=SERIAL or slot-id=N) and the key
// (object=LABEL and/or id=%01%02, percent-encoded bytes); the query names the module
// (module-path) and the user PIN (pin-value=PIN, or pin-source=FILE or file:///FILE).
// Without either, the caller hands the PIN over (armor takes it from
// $ARMOR_KEY_PASSPHRASE or $ARMOR_KEY_PASSPHRASE_FILE, so it stays out of armor.toml).
//
// The token signs with CKM_RSA_PKCS over the DigestInfo of the Release's digest, through
// github.com/ThalesGroup/crypto11 (sessions, login, key lookup) on
// github.com/miekg/pkcs11. Both need cgo: a build without cgo gives an error that says so.
package pkcs11
