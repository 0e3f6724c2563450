// Package inputs finds and reads the package files a build names: it expands the input
// patterns of armor.toml (with ** for any depth) into files, stats them, reads the .deb,
// .udeb, .ddeb and .dsc files that changed since the last build (Read), and keeps what it
// read of each in the stat cache (StatCache), so that a rebuild opens only new or changed
// files. It knows nothing of suites, releases or the tree: gen decides what the inputs
// become.
package inputs
