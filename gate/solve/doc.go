// Package solve decides whether a package can be installed: whether some set of
// packages holds it, meets every dependency of each of its members, holds no two that
// conflict, and holds one of each group the caller requires (the Essential packages).
// That is a SAT problem, and Solver is a CDCL solver (conflict-driven clause learning,
// with first-UIP learning and non-chronological backjumping) shaped for it.
//
// It is written here, not taken from a general solver such as gophersat, because of how
// the clauses come. A package's clauses (its dependencies, its conflicts) matter only once
// the package is installed, and most of a distribution is never installed by any one
// check: Solver asks for a package's clauses when it first sets the package true, decides
// only on the alternatives of a dependency not met yet (the first that can still be
// taken, as apt would), and stops as soon as every clause holds with the packages not
// chosen left out. A general solver must be given the whole cone of a package (every
// package reachable through any alternative, thousands for a desktop package) before it
// starts, and assigns every variable of it; checking a whole distribution that way builds
// and solves a cone per package. dose-distcheck likewise has its own solver for this.
//
// The Problem interface is the seam: the installability check's Universe implements it.
// The fuzz test compares Solver with an exhaustive search on small problems.
package solve
