// Package gen builds a signed APT repository tree from .deb files: it reads packages,
// lays out the pool, writes Packages indexes (plain, gz, xz) with by-hash copies, writes
// Release, InRelease and Release.gpg, and produces the release manifest. It is a pure
// library: no flags, no HTTP, no printing.
package gen
