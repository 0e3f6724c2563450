// Package release owns a suite's Release file (dists/<codename>/Release, the text that
// InRelease and Release.gpg sign): Make writes it, Parse reads it strictly, Redate moves
// its dates. The build, `armor verify` and controld all read Release files through Parse,
// so they judge one InRelease alike, and as apt does.
package release
