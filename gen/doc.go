// Package gen builds a signed APT repository tree from .deb, .udeb, .ddeb and .dsc files,
// and the release manifest that lists it: the pool, Packages indexes (the
// debian-installer ones for .udeb) and Sources indexes, plain, gz and xz, Contents files,
// by-hash copies, Release, InRelease and Release.gpg. A release is its parent plus a
// change, and a build costs what changed. It is a pure library: no flags, no HTTP, no
// printing.
//
// Build (build.go) is the table of contents: a list of stages, each in the file named for
// it, each a function of what it needs that returns what it made, with one cleanup path
// (steps, stages.go) that undoes a failed build.
//
//	load     load.go      the stat cache and the parent, in the background: its manifest,
//	                      its files fetched into the tree (hydrate.go), its indexes read
//	                      ahead (oldindex.go) or kept from the last build (plain.go)
//	collect  collect.go   the inputs, listed and read as gen/inputs does
//	plan     plan.go      the packages (resolve.go), the change applied to the parent's
//	                      (change.go, phase.go), and the difference
//	gate     gate.go      the release judged before anything is written (Options.Gate)
//	stage    pool.go      the pool files, beside
//	         indexes.go   the Packages and Sources indexes (sources.go, udeb.go) and the
//	         contents.go  Contents files (contentscache.go), then
//	         releases.go  the signed Release files and the suite-name aliases (aliases.go)
//	commit   commit.go    the tree (gen/tree), the manifest file and the build cache
//
// Packages indexes are assembled by gen/index, whose xz codec is gen/xz; the Debian
// formats themselves are debian/'s. VerifyTree (verify.go) checks a published tree as apt
// does.
package gen
