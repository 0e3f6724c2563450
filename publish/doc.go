// Package publish holds the workflows between a built tree and the world, as a library
// the armor command calls. UploadMissing makes a release's objects present in a store,
// uploading only the missing ones.
//
// It never prints and never exits; progress comes through a callback.
package publish
