// Package sign owns armor's OpenPGP keys and signatures: it generates and reads signing
// keys (including keys exported by gpg), clear-signs Release into InRelease, writes the
// detached Release.gpg, and verifies both against public keyrings.
//
// A Key signs through a Signer, the seam between OpenPGP and wherever the secret half
// lives: in this process for a key file, or in an HSM, a KMS or gpg-agent (the packages
// pkcs11, awskms and gpgagent below; keyuri opens one from a key URI). A Signer only makes
// raw signatures of a digest; this package builds the v4 signature packets around them
// itself (packet.go says why) and checks each with go-crypto before returning it.
// Signatures are deterministic for a given key, text, hash and signing time.
//
// Everything it writes is accepted by the verifiers that apt relies on in Debian 12:
// gpgv 2.2, sqv and apt itself. That is why keys are v4 RSA or legacy EdDSA (algorithm 22)
// and why every armored signature carries a CRC24 line.
package sign
