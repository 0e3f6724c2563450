package solve

// instantiate adds the clauses of v, just set true, to the database: for each
// dependency (¬v ∨ c1 ∨ … ∨ ck) and for each conflict (¬v ∨ ¬u). v is on the trail at
// the current level, so each clause is either satisfied, open (two literals left to
// watch), unit (its literal is enqueued) or false: the first false one is returned as
// the conflict, or -1.
func (s *Solver) instantiate(v int32) int32 {
	s.inst[v] = true
	s.touch(v)
	s.Stats.Instantiated++
	conflict := int32(-1)
	for _, cands := range s.p.Depends(v) {
		lits := s.learnt[:0]
		lits = append(lits, neg(v))
		for _, c := range cands {
			lits = append(lits, pos(c))
		}
		if len(cands) == 0 {
			// (¬v) alone: watched twice, so that v set true again after a backjump is
			// seen to fail at once.
			lits = append(lits, neg(v))
		}
		s.learnt = lits
		c := s.attach(lits)
		s.depsOf[v] = append(s.depsOf[v], c)
		s.agenda = append(s.agenda, c)
		if conflict < 0 && s.isFalse(c) {
			conflict = c
		}
	}
	for _, u := range s.p.Conflicts(v) {
		lits := append(s.learnt[:0], neg(v), neg(u))
		s.learnt = lits
		c := s.attach(lits)
		if conflict < 0 && s.isFalse(c) {
			conflict = c
		}
	}
	return conflict
}

// attach stores a clause made while some of its literals may be assigned, and watches
// it so that the two-watched-literal rule holds: it watches two literals that are not
// false if it has them; else a true or unassigned one and the false literal assigned
// last; else (all false) the two assigned last. A clause left with one unassigned
// literal and no true one has it enqueued.
func (s *Solver) attach(lits []lit) int32 {
	c := s.addClause(lits)
	cl := s.clause(c)
	// Order: true and unassigned literals first, then false ones by level, highest first.
	rank := func(l lit) int32 {
		switch s.litValue(l) {
		case 1:
			return 1 << 30
		case 0:
			return 1<<30 - 1
		}
		return s.level[varOf(l)]
	}
	for k := 0; k < 2 && k < len(cl); k++ {
		best := k
		for j := k + 1; j < len(cl); j++ {
			if rank(cl[j]) > rank(cl[best]) {
				best = j
			}
		}
		cl[k], cl[best] = cl[best], cl[k]
	}
	if len(cl) == 1 {
		s.touch(varOf(cl[0]))
		if s.litValue(cl[0]) == 0 {
			s.enqueue(cl[0], c)
		}
		return c
	}
	s.watch(cl[0], c)
	s.watch(cl[1], c)
	if s.litValue(cl[0]) == 0 && s.litValue(cl[1]) == -1 {
		s.enqueue(cl[0], c)
	}
	return c
}

// isFalse reports whether every literal of clause c is false.
func (s *Solver) isFalse(c int32) bool {
	for _, l := range s.clause(c) {
		if s.litValue(l) != -1 {
			return false
		}
	}
	return true
}

// propagate sets what the assignments on the trail imply, instantiating each variable
// set true, and returns a clause made false, or -1.
func (s *Solver) propagate() int32 {
	for s.qhead < len(s.trail) {
		p := s.trail[s.qhead]
		s.qhead++
		s.Stats.Propagations++
		if v := varOf(p); !isNeg(p) && !s.inst[v] {
			if c := s.instantiate(v); c >= 0 {
				return c
			}
		} else if !isNeg(p) {
			s.agenda = append(s.agenda, s.depsOf[v]...) // set true again after a backjump
		}
		if c := s.visit(notLit(p)); c >= 0 {
			return c
		}
	}
	return -1
}

// visit looks at the clauses watching f, which has just become false.
func (s *Solver) visit(f lit) int32 {
	ws := s.watches[f]
	kept := 0
	for i := 0; i < len(ws); i++ {
		c := ws[i]
		cl := s.clause(c)
		if cl[0] == f {
			cl[0], cl[1] = cl[1], cl[0]
		}
		if s.litValue(cl[0]) == 1 {
			ws[kept] = c
			kept++
			continue
		}
		moved := false
		for k := 2; k < len(cl); k++ {
			if s.litValue(cl[k]) != -1 {
				cl[1], cl[k] = cl[k], cl[1]
				s.watch(cl[1], c)
				moved = true
				break
			}
		}
		if moved {
			continue
		}
		ws[kept] = c
		kept++
		if s.litValue(cl[0]) == -1 {
			kept += copy(ws[kept:], ws[i+1:])
			s.watches[f] = ws[:kept]
			return c
		}
		s.enqueue(cl[0], c)
	}
	s.watches[f] = ws[:kept]
	return -1
}

// analyze derives from the false clause confl a learned clause whose first literal is
// the negation of the first unique implication point of the current level, and returns
// the level to go back to. The clause is left in s.learnt.
func (s *Solver) analyze(confl int32) int32 {
	learnt := append(s.learnt[:0], 0)
	pathC := 0
	var p lit = -1
	idx := len(s.trail) - 1
	cur := s.decisionLevel()
	for {
		cl := s.clause(confl)
		for j, q := range cl {
			if p >= 0 && j == 0 {
				continue // the literal this reason implied
			}
			v := varOf(q)
			if s.seen[v] || s.level[v] == 0 {
				continue
			}
			s.seen[v] = true
			if s.level[v] >= cur {
				pathC++
			} else {
				learnt = append(learnt, q)
			}
		}
		for !s.seen[varOf(s.trail[idx])] {
			idx--
		}
		p = s.trail[idx]
		idx--
		s.seen[varOf(p)] = false
		pathC--
		if pathC <= 0 {
			break
		}
		confl = s.reason[varOf(p)]
	}
	learnt[0] = notLit(p)
	back := int32(0)
	for j := 1; j < len(learnt); j++ {
		s.seen[varOf(learnt[j])] = false
		if lv := s.level[varOf(learnt[j])]; lv > back {
			back = lv
			learnt[1], learnt[j] = learnt[j], learnt[1]
		}
	}
	s.learnt = learnt
	return back
}

// cancelUntil undoes the assignments above level.
func (s *Solver) cancelUntil(level int32) {
	if s.decisionLevel() <= level {
		return
	}
	lim := int(s.trailLim[level])
	for i := len(s.trail) - 1; i >= lim; i-- {
		s.value[varOf(s.trail[i])] = 0
	}
	s.trail = s.trail[:lim]
	s.trailLim = s.trailLim[:level]
	s.qhead = lim
}

func (s *Solver) decide(l lit) {
	s.Stats.Decisions++
	s.trailLim = append(s.trailLim, int32(len(s.trail)))
	s.enqueue(l, noReason)
}
