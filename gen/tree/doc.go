// Package tree writes a repository's dists/ and pool/ tree the way a build must: every file
// is staged first, and one Commit makes them all visible, flushed with one syncfs per file
// system, renamed in an order that never lets a signed Release name an index not yet in
// place, and undone whole (Rollback, Abort) if the build fails before it is done. It knows
// nothing of what the files are.
package tree
