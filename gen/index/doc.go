// Package index assembles a Packages index in its three served forms (plain, gzip, xz) at a
// cost proportional to what changed.
//
// The stanza list is cut into content-defined chunks: whether a chunk ends after a stanza
// depends only on that stanza's bytes (and on where the previous chunk ended), so inserting
// or removing one stanza changes one or two chunks and leaves every other chunk's bytes as
// they were. Each chunk is compressed as one gzip member, on its own, and as LZMA2 data
// that starts with a state reset and may refer back into the chunk before it (not
// further), and the compressed chunks are kept in an on-disk Cache keyed by the SHA-256 of
// their plain bytes (and of the previous chunk's, for the LZMA2 data). Packages.gz is the
// concatenation of the members; Packages.xz is one xz stream of one block holding the
// LZMA2 data of every chunk in turn, with the block's end, index and footer written
// afresh (xzform.go, with the encoder and the container of gen/xz). A change recompresses
// the changed chunks' gzip members and the LZMA2 data of the changed chunks and of the
// chunk after each. apt 2.6 accepts both.
//
// Build also returns the size, MD5 and SHA-256 of each form, as Release lists them.
// The cache keeps, per index name, the hash states at every chunk boundary of the last
// build, keyed by a chain id derived from the content before the boundary, so that the
// next build hashes only from its first changed chunk to the end (see digest.go).
// An index spliced from its previous version is built on a Base (BuildOn), which says how
// many bytes at each end are that version's: the chunks there, and their sums, come from
// the same state, and the build cuts and hashes only the chunks in between (see base.go).
//
// A runner whose cache starts empty can fill it from the published files of the previous
// index (Cache.Seed): their gzip members and chunks' LZMA2 data are exactly the cached
// entries, so it pays for checking them (decompressing), not for compressing them again.
//
// Output is deterministic: the same stanzas give the same bytes and digests whether or not
// a cache is used and whatever it holds.
package index
