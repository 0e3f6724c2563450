// Package synth writes synthetic but valid Debian binary packages for tests and
// benchmarks: repositories of any size, deterministic for a given seed, whose
// packages dpkg-deb unpacks and apt can install (each depends only on
// lower-numbered ones). It also builds single archives from a raw control file,
// so tests can make malformed packages.
package synth
