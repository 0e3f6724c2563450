// Package gpgagent signs through a running gpg-agent, with a key named gpg-agent:FINGERPRINT
// (the primary key's or a signing subkey's). The secret key stays with the agent, or on
// the smartcard or YubiKey the agent reaches through scdaemon; armor sends the agent the
// digest of a Release and wraps the signature it returns in OpenPGP packets.
//
// gpg itself supplies what the agent does not know: the key's OpenPGP certificate
// (`gpg --export`, whose creation time fixes the fingerprint) and the keygrip that names
// the key to the agent (`gpg --with-keygrip --list-secret-keys`). GNUPGHOME applies as it
// does for gpg.
//
// The Assuan exchange (SIGKEY, SETHASH, PKSIGN and the S-expression of the answer) is
// written here by hand: the Go Assuan libraries (foxcpp/go-assuan, unchanged since 2020)
// only frame lines and are not served by the module proxy this project builds from, and
// the part that matters, the agent's signing commands and answer, is the same few lines
// either way (see the GnuPG manual, "Agent PKSIGN").
package gpgagent
