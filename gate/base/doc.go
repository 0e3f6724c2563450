// Package base reads the base repositories a suite names in armor.toml (the
// distribution its packages are installed on, such as Debian bookworm main), for the
// installability check to resolve what the repository itself does not have.
//
// A base is a Packages file given by path or URL (plain, .gz or .xz), or an APT source
// line ("deb [signed-by=KEYRING] URI SUITE COMPONENT..."), whose InRelease is fetched and
// verified against the keyring (the system's APT keyrings without signed-by, as apt
// does) and whose Packages indexes for an architecture are taken by the SHA-256 the
// signed Release gives. Files are fetched once and kept in a cache directory under their
// SHA-256: an index the cache holds is not fetched again, and a Packages file named by
// URL is asked for with the validators of the copy kept (If-None-Match,
// If-Modified-Since). When a fetch fails, a copy kept from before serves, and the error
// is returned beside it for the caller to warn about.
package base
