// Package index assembles a Packages index in its three served forms (plain, gzip, xz) at a
// cost proportional to what changed.
//
// The stanza list is cut into content-defined chunks: whether a chunk ends after a stanza
// depends only on that stanza's bytes (and on where the previous chunk ended), so inserting
// or removing one stanza changes one or two chunks and leaves every other chunk's bytes as
// they were. Each chunk is compressed on its own, as one gzip member and as one xz block,
// and the compressed chunks are kept in an on-disk Cache keyed by the SHA-256 of their
// plain bytes. Packages.gz is the concatenation of the members; Packages.xz is one xz
// stream holding the blocks, with its index and footer written afresh. apt 2.6 accepts
// both (several gzip members; one xz stream of several blocks).
//
// Build also returns the size, MD5, SHA-1 and SHA-256 of each form, as Release lists them.
// The cache keeps, per index name, the hash states at every chunk boundary of the last
// build, keyed by a chain id derived from the content before the boundary, so that the
// next build hashes only from its first changed chunk to the end (see digest.go).
//
// A runner whose cache starts empty can fill it from the published files of the previous
// index (Cache.Seed): their gzip members and xz blocks are exactly the cached chunks, so
// it pays for checking them (decompressing), not for compressing them again.
//
// Output is deterministic: the same stanzas give the same bytes and digests whether or not
// a cache is used and whatever it holds.
package index
