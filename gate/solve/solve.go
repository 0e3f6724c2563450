package solve

// Problem gives the clauses of the packages (variables 0 to n-1) as Solver needs them.
// It is called only from the goroutine running Solve; its answers must not change.
type Problem interface {
	// Depends returns, for each dependency of v, the variables that meet it: v true
	// requires one of each list true. An empty list means v cannot be installed.
	Depends(v int32) [][]int32
	// Conflicts returns the variables that cannot be true beside v. The relation must be
	// symmetric: u is in Conflicts(v) exactly when v is in Conflicts(u).
	Conflicts(v int32) []int32
}

// A literal is a variable times two, plus one if negated.
type lit = int32

func pos(v int32) lit   { return v << 1 }
func neg(v int32) lit   { return v<<1 | 1 }
func varOf(l lit) int32 { return l >> 1 }
func isNeg(l lit) bool  { return l&1 == 1 }
func notLit(l lit) lit  { return l ^ 1 }

const noReason int32 = -1

// Solver checks packages one at a time; it reuses its memory from one check to the
// next. Not safe for concurrent use.
type Solver struct {
	p Problem
	n int

	value   []int8    // per variable: 0 unassigned, 1 true, -1 false
	level   []int32   // per variable: the decision level it was assigned at
	reason  []int32   // per variable: the clause that implied it, or noReason
	seen    []bool    // per variable, during analysis
	inst    []bool    // per variable: its clauses are in the database
	depsOf  [][]int32 // per variable: its dependency clauses, once instantiated
	watches [][]int32 // per literal: clauses watching it (visited when it becomes false)
	touched []int32   // variables whose state must be cleared before the next check
	marked  []bool    // per variable: in touched

	arena    []int32 // clauses: size, then literals; a clause is its offset
	trail    []lit
	trailLim []int32 // trail length at the start of each decision level
	qhead    int
	learned  []int32 // learned clauses
	global   []int32 // the required groups' clauses
	agenda   []int32 // clauses that may be open, to look at before deciding
	learnt   []lit   // scratch for analysis

	// Stats count, over the solver's life, what it did.
	Stats Stats
}

// Stats are counters for benchmarks and tests.
type Stats struct {
	Solves, Decisions, Conflicts, Propagations, Instantiated int
}

// New returns a solver for a problem of n variables.
func New(p Problem, n int) *Solver {
	return &Solver{
		p: p, n: n,
		value: make([]int8, n), level: make([]int32, n), reason: make([]int32, n),
		seen: make([]bool, n), marked: make([]bool, n), inst: make([]bool, n), depsOf: make([][]int32, n),
		watches: make([][]int32, 2*n),
	}
}

func (s *Solver) litValue(l lit) int8 {
	v := s.value[varOf(l)]
	if isNeg(l) {
		return -v
	}
	return v
}

func (s *Solver) decisionLevel() int32 { return int32(len(s.trailLim)) }

// touch notes that v's state must be cleared before the next check.
func (s *Solver) touch(v int32) {
	if !s.marked[v] {
		s.marked[v] = true
		s.touched = append(s.touched, v)
	}
}

// reset clears what the last check left.
func (s *Solver) reset() {
	for _, v := range s.touched {
		s.value[v], s.inst[v], s.depsOf[v], s.marked[v] = 0, false, s.depsOf[v][:0], false
		s.watches[pos(v)] = s.watches[pos(v)][:0]
		s.watches[neg(v)] = s.watches[neg(v)][:0]
	}
	s.touched = s.touched[:0]
	s.arena, s.trail, s.trailLim = s.arena[:0], s.trail[:0], s.trailLim[:0]
	s.learned, s.global, s.agenda = s.learned[:0], s.global[:0], s.agenda[:0]
	s.qhead = 0
}

func (s *Solver) clause(c int32) []lit {
	size := s.arena[c]
	return s.arena[c+1 : c+1+size]
}

// addClause stores a clause and returns its offset; it does not watch it.
func (s *Solver) addClause(lits []lit) int32 {
	c := int32(len(s.arena))
	s.arena = append(s.arena, int32(len(lits)))
	s.arena = append(s.arena, lits...)
	return c
}

func (s *Solver) watch(l lit, c int32) {
	v := varOf(l)
	s.touch(v)
	s.watches[l] = append(s.watches[l], c)
}

func (s *Solver) enqueue(l lit, reason int32) {
	v := varOf(l)
	s.touch(v)
	if isNeg(l) {
		s.value[v] = -1
	} else {
		s.value[v] = 1
	}
	s.level[v] = s.decisionLevel()
	s.reason[v] = reason
	s.trail = append(s.trail, l)
}
