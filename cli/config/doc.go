// Package config reads armor.toml, the distributor's description of a repository: its
// identity and hostnames, its suites and where their .deb files come from, the signing
// key, the store and controld. Decoding is strict: an unknown key is an error that names
// the file and line. Secrets are never in the file: passphrases and tokens come from the
// environment or from files it names. SigningKey and Passphrase are the one place that
// decides where the signing key and its passphrase come from (the environment first,
// then armor.toml), for every command that signs.
package config
