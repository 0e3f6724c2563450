package solve

import "context"

// checkEvery is how many rounds of propagation a solve runs between looks at its
// context (it looks before the first, so that a check of many packages stops too):
// often enough that a cancelled build stops at once, seldom enough to cost
// nothing.
const checkEvery = 256

// Solve reports whether root can be installed together with one variable of each of
// the required groups (none may be empty). When it can, model holds every variable of
// the installation found, root first; each of them can be installed too, the model
// being an installation that holds it. The slice is reused by the next call. A search
// can take time exponential in the problem's size: it stops with ctx's error once ctx
// is done.
func (s *Solver) Solve(ctx context.Context, root int32, required [][]int32) (model []int32, ok bool, err error) {
	s.reset()
	s.Stats.Solves++
	for _, g := range required {
		lits := s.learnt[:0]
		for _, v := range g {
			lits = append(lits, pos(v))
		}
		s.learnt = lits
		c := s.attach(lits)
		s.global = append(s.global, c)
		s.agenda = append(s.agenda, c)
	}
	for round := 0; ; round++ {
		if round%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		if confl := s.propagate(); confl >= 0 {
			s.Stats.Conflicts++
			if s.decisionLevel() == 0 {
				return nil, false, nil
			}
			back := s.analyze(confl)
			s.cancelUntil(back)
			s.learn()
			continue
		}
		if s.decisionLevel() == 0 {
			switch s.litValue(pos(root)) {
			case -1:
				return nil, false, nil
			case 0:
				s.decide(pos(root))
				continue
			}
		}
		l, open := s.pickOpen()
		if !open {
			return s.model(root), true, nil
		}
		s.decide(l)
	}
}

// learn adds the clause analyze left in s.learnt and enqueues its first literal.
func (s *Solver) learn() {
	c := s.addClause(s.learnt)
	cl := s.clause(c)
	s.learned = append(s.learned, c)
	s.agenda = append(s.agenda, c)
	if len(cl) > 1 {
		s.watch(cl[0], c)
		s.watch(cl[1], c)
	}
	s.enqueue(cl[0], c)
}

// open reports whether clause c needs a decision: no literal of it is true, every
// negative one is false, and it returns the first positive literal left unassigned. A
// negative literal left unassigned holds, since every variable not chosen is left out.
func (s *Solver) open(c int32) (lit, bool) {
	var first lit = -1
	for _, l := range s.clause(c) {
		switch s.litValue(l) {
		case 1:
			return 0, false
		case 0:
			if isNeg(l) {
				return 0, false
			}
			if first < 0 {
				first = l
			}
		}
	}
	return first, first >= 0
}

// pickOpen returns a literal to decide: the first alternative left of a clause that
// needs one. The agenda holds the clauses made or learned since it was last emptied;
// when it is empty, every clause that could need a decision is looked at again (a
// backjump may have undone what met one), and only if none does is the check over.
func (s *Solver) pickOpen() (lit, bool) {
	for len(s.agenda) > 0 {
		c := s.agenda[len(s.agenda)-1]
		s.agenda = s.agenda[:len(s.agenda)-1]
		if l, ok := s.open(c); ok {
			s.agenda = append(s.agenda, c) // it may need another look after a backjump
			return l, true
		}
	}
	for _, l := range s.trail {
		if isNeg(l) {
			continue
		}
		for _, c := range s.depsOf[varOf(l)] {
			if d, ok := s.open(c); ok {
				return d, true
			}
		}
	}
	for _, cs := range [][]int32{s.learned, s.global} {
		for _, c := range cs {
			if d, ok := s.open(c); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// model lists the variables set true, root first.
func (s *Solver) model(root int32) []int32 {
	out := s.learnt[:0]
	out = append(out, root)
	for _, l := range s.trail {
		if !isNeg(l) && varOf(l) != root {
			out = append(out, varOf(l))
		}
	}
	s.learnt = out
	return out
}
