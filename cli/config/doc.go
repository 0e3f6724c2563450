// Package config reads armor.toml, the distributor's description of a repository: its
// identity and hostnames, its suites and where their .deb files come from, the signing
// key, the store and controld. Decoding is strict: an unknown key is an error that names
// the file and line. Secrets are never in the file: passphrases and tokens come from the
// environment or from files it names.
package config
