// Package xz writes the xz format (https://tukaani.org/xz/xz-file-format.txt) the way an
// index assembled from cached pieces needs it: an LZMA2 encoder whose output for a piece
// of data depends only on that piece and the data before it (EncodeLZMA2), the container's
// headers, block end, index and footer as separate pieces (StreamHeader, BlockHeader,
// BlockEnd, IndexAndFooter), the combination of CRC-32s of consecutive pieces
// (CRC32Combine), and the parsing and checking of what it wrote (ParseStream, SplitLZMA2,
// CheckLZMA2). It knows nothing of Debian: gen/index is its user.
//
// It is written by hand because no Go library does this. ulikunitz/xz (which CheckLZMA2
// uses to decode) has a greedy encoder, whose output is about a tenth larger on Packages
// text than that of this optimal parser, and neither it nor liblzma's bindings can start a
// chunk of LZMA2 data with a state reset that refers back into given data, which is what
// lets a changed index recompress only the pieces that changed. The encoder reaches every
// position of a window of up to 4096 bytes by the cheapest sequence of literals, matches
// and repeated matches, priced with the coder's current probabilities, as liblzma's normal
// mode does (without its literal-after-match shortcuts); its match finder is a hash chain
// over 4-byte prefixes plus a table of 3-byte ones. docs/benchmarks.md has its
// measurements against xz -6.
package xz
