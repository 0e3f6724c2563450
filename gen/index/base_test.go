package index

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// plainOf returns the plain index of stanzas, as Build lays it out.
func plainOf(stanzas [][]byte) []byte {
	var b []byte
	for _, s := range stanzas {
		b = append(append(b, s...), '\n')
	}
	return b
}

// trueBase returns the Base that relates the index of stanzas to the index old: the bytes
// they share at each end.
func trueBase(old, stanzas [][]byte) Base {
	a, b := plainOf(old), plainOf(stanzas)
	head := 0
	for head < min(len(a), len(b)) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < min(len(a), len(b)) && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	return Base{SHA256: wholeDigests(a).SHA256, Head: head, Tail: tail}
}

// edits are the changes TestBuildOnBase makes to an index of 250 stanzas; r makes new
// stanzas.
var edits = []struct {
	name string
	ends bool // leaves most of the index as it was, at its start and its end
	edit func(r *rand.Rand, s [][]byte) [][]byte
}{
	{"insert in the middle", true, func(r *rand.Rand, s [][]byte) [][]byte {
		return insertAt(s, 125, synthStanza(r, synthName(124)+"a", "1.0-1"))
	}},
	{"insert first", true, func(r *rand.Rand, s [][]byte) [][]byte {
		return insertAt(s, 0, synthStanza(r, "a", "1.0-1"))
	}},
	{"append", true, func(r *rand.Rand, s [][]byte) [][]byte {
		return append(slices.Clone(s), synthStanza(r, "zz", "1.0-1"))
	}},
	{"remove first", true, func(r *rand.Rand, s [][]byte) [][]byte { return slices.Clone(s[1:]) }},
	{"remove last", true, func(r *rand.Rand, s [][]byte) [][]byte { return slices.Clone(s[:len(s)-1]) }},
	{"remove in the middle", true, func(r *rand.Rand, s [][]byte) [][]byte { return slices.Delete(slices.Clone(s), 100, 103) }},
	{"replace one", true, func(r *rand.Rand, s [][]byte) [][]byte {
		s = slices.Clone(s)
		s[190] = synthStanza(r, synthName(190), "9.9-9")
		return s
	}},
	{"change near each end", false, func(r *rand.Rand, s [][]byte) [][]byte {
		s = slices.Delete(slices.Clone(s), 240, 241)
		return insertAt(s, 5, synthStanza(r, synthName(4)+"a", "1.0-1"))
	}},
	{"two changes of the same size", false, func(r *rand.Rand, s [][]byte) [][]byte {
		// The index keeps its size, so a cut after the first change falls where an old
		// one did, on bytes that still differ further on.
		s = slices.Clone(s)
		for _, i := range []int{20, 230} {
			s[i] = bytes.Clone(s[i])
			s[i][len(s[i])-2] = '!' // the full stop ending the description
		}
		return s
	}},
	{"unchanged", true, func(r *rand.Rand, s [][]byte) [][]byte { return slices.Clone(s) }},
	{"all new", false, func(r *rand.Rand, s [][]byte) [][]byte { return synthStanzas(len(s), 77) }},
	{"one stanza left", false, func(r *rand.Rand, s [][]byte) [][]byte { return slices.Clone(s[:1]) }},
}

// TestBuildOnBase builds an index, changes it, and builds it again on the Base that says
// which bytes at each end stayed: the result must be byte for byte what a build without a
// cache makes, and a change in the middle must leave most chunks to the digest state.
func TestBuildOnBase(t *testing.T) {
	old := synthStanzas(250, 5)
	built := t.TempDir() // the cache of a build of old, copied for each edit
	mustBuild(t, old, openCache(t, built), small)
	for _, tc := range edits {
		t.Run(tc.name, func(t *testing.T) {
			stanzas := tc.edit(rand.New(rand.NewPCG(8, 8)), old)
			want := mustBuild(t, stanzas, nil, small)
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(built)); err != nil {
				t.Fatal(err)
			}
			c := openCache(t, dir)
			got, err := build(stanzas, c, testName, small, new(trueBase(old, stanzas)))
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, got, want)
			st, total := c.Stats(), int64(len(want.Plain))
			scanned := st.Scanned
			if tc.ends && scanned > total/5 {
				t.Errorf("scanned %d of %d bytes: the unchanged chunks were cut and hashed again", scanned, total)
			}
			// The sums taken from the state name the cache's entries: a wrong one would
			// miss them (and compress afresh).
			if tc.ends && (st.Misses > 6 || st.Corrupt != 0) {
				t.Errorf("cache stats %+v: the chunks taken from the state did not find their entries", st)
			}
			if !tc.ends && scanned < total/2 {
				t.Errorf("scanned %d of %d bytes", scanned, total)
			}
			// The state the build recorded serves the next one as well as a full build's.
			c = openCache(t, dir)
			again := insertAt(stanzas, len(stanzas)/2, synthStanza(rand.New(rand.NewPCG(9, 9)), "m", "2.0-1"))
			got, err = build(again, c, testName, small, new(trueBase(stanzas, again)))
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, got, mustBuild(t, again, nil, small))
		})
	}
}

// TestBuildOnOtherBase gives Build a Base that is not the index its digest state was
// recorded for, and bases without a state to check them against: each is ignored.
func TestBuildOnOtherBase(t *testing.T) {
	old := synthStanzas(300, 5)
	stanzas := insertAt(old, 150, synthStanza(rand.New(rand.NewPCG(1, 2)), synthName(149)+"a", "1.0-1"))
	want := mustBuild(t, stanzas, nil, small)
	right := trueBase(old, stanzas)
	other := right
	other.SHA256 = wholeDigests(plainOf(stanzas)).SHA256
	for _, tc := range []struct {
		name  string
		base  Base
		state bool
	}{
		{"another index's sum", other, true},
		{"not a sum", Base{SHA256: "f00", Head: right.Head, Tail: right.Tail}, true},
		{"no digest state", right, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.state {
				mustBuild(t, old, openCache(t, dir), small)
			}
			c := openCache(t, dir)
			got, err := build(stanzas, c, testName, small, &tc.base)
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, got, want)
			if s := c.Stats().Scanned; s != int64(len(want.Plain)) {
				t.Errorf("scanned %d bytes, want all %d", s, len(want.Plain))
			}
		})
	}
	// Without a cache there is no state at all.
	got, err := build(stanzas, nil, testName, small, &right)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, got, want)
}

// TestBuildOnBaseRejectsMalformedStanza: a stanza Build cuts itself is checked as
// without a Base.
func TestBuildOnBaseRejectsMalformedStanza(t *testing.T) {
	old := synthStanzas(300, 5)
	stanzas := insertAt(old, 150, []byte("Package: broken\n\nVersion: 1\n"))
	dir := t.TempDir()
	mustBuild(t, old, openCache(t, dir), small)
	_, err := build(stanzas, openCache(t, dir), testName, small, new(trueBase(old, stanzas)))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("stanza 150")) {
		t.Fatalf("build: %v, want the malformed stanza 150 named", err)
	}
}

// FuzzBuildOn makes random changes to an index and builds each on its true Base, with
// chunks of a few stanzas so that the changes meet many boundaries.
func FuzzBuildOn(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		f.Add(seed, uint8(3))
	}
	tiny := chunking{min: 1500, avg: 3000, max: 6000}
	f.Fuzz(func(t *testing.T, seed uint64, changes uint8) {
		r := rand.New(rand.NewPCG(seed, 3))
		old := synthStanzas(40+r.IntN(80), seed)
		stanzas := slices.Clone(old)
		for k := range int(changes%8) + 1 {
			switch at := r.IntN(len(stanzas) + 1); {
			case r.IntN(3) == 0 && len(stanzas) > 1 && at < len(stanzas):
				stanzas = slices.Delete(stanzas, at, at+1)
			case r.IntN(2) == 0 && at < len(stanzas):
				stanzas[at] = synthStanza(r, fmt.Sprintf("r%d", k), "1.0-1")
			default:
				stanzas = insertAt(stanzas, at, synthStanza(r, fmt.Sprintf("n%d", k), "1.0-1"))
			}
		}
		dir := t.TempDir()
		if _, err := build(old, openCache(t, dir), testName, tiny, nil); err != nil {
			t.Fatal(err)
		}
		got, err := build(stanzas, openCache(t, dir), testName, tiny, new(trueBase(old, stanzas)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := build(stanzas, nil, testName, tiny, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameFiles(t, got, want)
	})
}
