// Package publish holds the workflows between a built tree and the world, as a library
// the armor command calls:
//
//   - Push: check first that controld would take the release (Preflight: controld
//     answers, knows the token, the token may push there, the repository exists), upload
//     what the store lacks of it (UploadMissing, guided by the record of what the last
//     push put there, and by the build's record of what the release adds to its parent:
//     WriteBuildRecord), then Record it in controld and activate it.
//   - Record: hand a release already in the store to controld, activating it on its
//     parent only (compare-and-swap on the release it was built on, so a release never
//     replaces one it does not contain); Activate: activate a recorded release, named by
//     a prefix of its id, on the release the operator expects to be active.
//   - Previous, RollbackPointer and Republish: roll back, either by flipping the pointer
//     or by re-signing the previous release's content as a new release; controld marks
//     the release rolled back, and activating it again (or a release built on it) is a
//     *RolledBackError unless forced. WriteManifest puts the active release's manifest
//     in the local manifest's place, so the next build starts from it.
//   - OpenStore, FetchObject and FetchManifest: reach the store and read an object or a
//     manifest by hash, checked against it.
//   - Check: find the objects of recorded releases that the store lacks or holds with
//     another size or content (armor store check).
//   - DeleteRelease and GC: forget a release, and have controld delete from the store
//     what no kept release references (armor releases delete, armor gc).
//
// It takes plain options (paths, an opened store or a remote, a controld client, a
// signing key) and returns results; it never prints and never exits. Progress comes
// through a callback. Reading armor.toml, flags and output are the command's (cli).
package publish
