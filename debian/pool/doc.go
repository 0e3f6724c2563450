// Package pool names files in a Debian pool the way dak and reprepro do:
// pool/<component>/<prefix>/<source>/<filename>, where the prefix is the source
// package's first letter, or "lib" and the next letter for lib* sources.
package pool
