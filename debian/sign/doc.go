// Package sign owns armor's OpenPGP keys and signatures: it generates and reads signing
// keys (including keys exported by gpg), clear-signs Release into InRelease, writes the
// detached Release.gpg, and verifies both against public keyrings.
//
// Everything it writes is accepted by the verifiers that apt relies on in Debian 12:
// gpgv 2.2, sqv and apt itself. That is why keys are v4 RSA or legacy EdDSA (algorithm 22)
// and why every armored signature carries a CRC24 line.
package sign
