package gate

import "github.com/armor-apt/armor/gate/solve"

// Checker decides which packages of a universe can be installed, as dose-distcheck
// does: a package can be if some set of packages of the universe holds it, meets every
// Depends and Pre-Depends of each member, holds no two that conflict (Conflicts, Breaks,
// one version of a name), and holds one of each Essential package. Each installation
// found vouches for all its members, so most packages need no check of their own.
type Checker struct {
	u      *Universe
	s      *solve.Solver
	known  []int8 // per package: 1 installable, -1 not, 0 not known yet
	Solves int    // checks run (the rest were vouched for)
}

// NewChecker returns a checker of u's packages.
func NewChecker(u *Universe) *Checker {
	return &Checker{u: u, s: solve.New(u, u.Len()), known: make([]int8, u.Len())}
}

// Installable reports whether package id can be installed.
func (c *Checker) Installable(id int32) bool {
	if k := c.known[id]; k != 0 {
		return k > 0
	}
	c.Solves++
	model, ok := c.s.Solve(id, c.u.Essential())
	if !ok {
		c.known[id] = -1
		return false
	}
	for _, v := range model {
		c.known[v] = 1
	}
	return true
}

// Broken returns those of ids that cannot be installed, in the order given.
func (c *Checker) Broken(ids []int32) []int32 {
	var out []int32
	for _, id := range ids {
		if !c.Installable(id) {
			out = append(out, id)
		}
	}
	return out
}

// All returns the ids of every package of the universe.
func (u *Universe) All() []int32 {
	out := make([]int32, u.Len())
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
