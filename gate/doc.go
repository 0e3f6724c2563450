// Package gate is the release gate: it decides which binary packages of a release can be
// installed, as dose-distcheck does for Debian, so that a build can refuse a release in
// which `apt-get install` of one of its packages fails for every user.
//
// A Universe holds the packages one installation can draw from (a suite's packages for
// one architecture, with the base repositories it names) and reads their relations as
// dpkg and apt do (universe.go, conflicts.go); a Checker (check.go) decides each package
// with the solver of gate/solve, an installation found for one package vouching for all
// its members.
package gate
