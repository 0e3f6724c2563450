// Package manifest owns armor's release manifest: its types, the deterministic TOML
// encoding committed to git, strict decoding, validation, the release id, and the diff
// between two manifests.
//
// A manifest maps every served path to a content-addressed object (sha256, size). It is
// the whole description of a release: the edge serves exactly what it lists, controld
// records it unchanged, and the next incremental build starts from it.
package manifest
