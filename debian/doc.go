// Package debian holds no code: its sub-packages are the Debian and OpenPGP formats that
// the builder (gen), the push workflows (publish) and the daemons (controld, edged) all
// read, so that no daemon imports the builder and every side judges a file alike.
//
//   - deb: .deb and .dsc files read in one pass (control, file list, digests); a
//     package's Packages stanza and a source's Sources stanza.
//   - release: a suite's Release file, written, parsed strictly and redated.
//   - sign: OpenPGP keys, InRelease and Release.gpg signatures, and their verification.
//   - pool: where a package's file lives in pool/, as dak and reprepro name it.
//
// None of them builds a tree, talks to a store or serves HTTP; internal/layering checks
// that they import nothing that does.
package debian
