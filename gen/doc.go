// Package gen builds a signed APT repository tree from .deb, .udeb, .ddeb and .dsc files:
// it reads packages, lays out the pool, writes Packages indexes (the debian-installer ones
// for .udeb, udeb.go) and Sources indexes (sources.go), plain, gz and xz, and Contents
// files (plain, gz), with by-hash copies, writes Release, InRelease and Release.gpg, and
// produces the release manifest. It is a pure library: no flags, no HTTP, no printing.
//
// Build (build.go) reads top to bottom as the build's phases, each a function of what it
// needs returning what it made: load the parent (parent.go, in the background), collect
// the inputs (collect.go, with gen/inputs), resolve the package list (resolve.go), diff it
// with the parent, stage the pool (pool.go), write the indexes (indexes.go, with the
// parent's indexes read ahead in oldindex.go) and the Contents files (contents.go, from
// the parent's and the file lists of contentscache.go), sign the Release files
// (releases.go), and commit the tree (gen/tree) and the stat cache (commit.go). VerifyTree
// (verify.go) checks a published tree as apt does. The Release file itself is
// debian/release's.
package gen
