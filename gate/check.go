package gate

import (
	"context"

	"github.com/armor-apt/armor/gate/solve"
)

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

// Installable reports whether package id can be installed; it stops with ctx's error
// once ctx is done.
func (c *Checker) Installable(ctx context.Context, id int32) (bool, error) {
	if k := c.known[id]; k != 0 {
		return k > 0, nil
	}
	c.Solves++
	model, ok, err := c.s.Solve(ctx, id, c.u.Essential())
	if err != nil {
		return false, err
	}
	if !ok {
		c.known[id] = -1
		return false, nil
	}
	for _, v := range model {
		c.known[v] = 1
	}
	return true, nil
}

// Broken returns those of ids that cannot be installed, in the order given.
func (c *Checker) Broken(ctx context.Context, ids []int32) ([]int32, error) {
	var out []int32
	for _, id := range ids {
		ok, err := c.Installable(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// All returns the ids of every package of the universe.
func (u *Universe) All() []int32 {
	out := make([]int32, u.Len())
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
