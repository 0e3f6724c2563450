// Package gate is the release gate: it decides which binary packages of a release can be
// installed, as dose-distcheck does for Debian, so that a build can refuse a release in
// which `apt-get install` of one of its packages fails for every user.
//
// A Universe holds the packages one installation can draw from (a suite's packages for
// one architecture, with the base repositories it names) and reads their relations as
// dpkg and apt do (universe.go, conflicts.go); a Checker (check.go) decides each package
// with the solver of gate/solve, an installation found for one package vouching for all
// its members.
//
// A Snapshot (snapshot.go) keeps a suite's packages between builds in the form a
// Universe reads in place, so that a check of a change (kept.go: the snapshot with
// packages left out and added) reads only the packages it reaches.
package gate
