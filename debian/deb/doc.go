// Package deb reads Debian binary packages (.deb files): their control paragraph, the
// files they install (for Contents), their size and their MD5, SHA-1 and SHA-256
// digests, all in one sequential pass over the file. It also renders a package's stanza
// for a Packages index, and names its canonical pool file.
//
// The ar container and the control.tar member are read here as a stream rather than
// with pault.ag/go/debian/deb, whose loader needs an io.ReaderAt (so a file would be
// read once to hash it and again to parse it) and whose xz reader allocates the
// full 8 MiB dictionary per package. control.tar may be uncompressed or compressed
// with gzip, xz or zstd, as dpkg-deb writes it; data.tar also with bzip2 or lzma, as old
// packages have it. The control paragraph is parsed
// here too, so that multi-line values keep their continuation lines byte for byte;
// versions are checked with pault.ag/go/debian/version.
// Source packages (.dsc) are read in dsc.go with pault.ag/go/debian/control: the .dsc
// is parsed, every file it names is checked beside it, and its Sources stanza is written.
// Packages and Sources indexes are read in index.go, streaming, by a parser of its own:
// go-debian decodes every field of every stanza into structures, where
// controld needs a few fields of each, and a reader strict where apt and a lenient
// parser could read one text two ways.
package deb
