// Package relation parses the relationship fields of binary packages (Depends,
// Pre-Depends, Conflicts, Breaks, Provides, Replaces) as dpkg reads them in a Packages
// index: comma-separated relations, alternatives with "|" where the field allows them, a
// version constraint in parentheses, and an architecture qualifier (":any", ":native" or
// an architecture name).
//
// pault.ag/go/debian/dependency reads the same syntax, but builds each name a byte at a
// time and accepts what dpkg refuses (an empty name, a second constraint, an unknown
// operator is its own error only sometimes); the installability check parses every
// relation of a whole distribution, so it gets a strict parser that allocates only the
// slices it returns. Versions are checked and compared with pault.ag/go/debian/version.
// The fuzz tests hold the two parsers to the same reading of what both accept.
package relation
