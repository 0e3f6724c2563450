package gen

import (
	"bytes"
	"io"
	"os"
	"sync"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/manifest"
)

// oldIndex is the tree's current Packages file, split into stanzas.
type oldIndex struct {
	data    []byte // the file
	stanzas [][]byte
	offs    []int    // where each stanza starts in data
	sums    [][]byte // the SHA256 field of each stanza
	// own is true when nothing else holds data: the new index may then be spliced in
	// its place (see splice).
	own bool
	// sum is the SHA-256 of data, as the parent's Release lists it; "" when unknown.
	sum string
	// members[i] is the package of stanzas[i], when the file lists exactly the previous
	// release's members in order: then stanzas are found by walking both lists together.
	members []*manifest.Package
	next    int
	bySum   map[string]int // otherwise, stanzas by SHA256; made when first needed
}

// readOldIndex returns the parent's index at indexPath, split, with members (the
// previous release's members of the index) attached: taken from par.old if it was read
// ahead, loaded now otherwise.
func readOldIndex(par *parent, indexPath string, members []*manifest.Package) *oldIndex {
	x := par.takeLoaded(indexPath)
	if x == nil {
		x = par.old.take(indexPath)
	}
	if x == nil {
		x = par.loadIndex(indexPath)
	}
	x.attach(members)
	return x
}

// load returns the parent's uncompressed index at indexPath (relative to the tree),
// whose digests are d, split: as hydrate made it, if it did, else as parentPlain finds
// it. An index it cannot find has no stanzas.
func (m *madeIndexes) load(dd dirs, indexPath string, d release.Digests) *oldIndex {
	// A stanza is about a kilobyte: the estimate only sizes the slices.
	n := int(d.Size/1024) + 1
	if data, shared := m.takeShared(indexPath); data != nil {
		x := splitOldIndex(data, n)
		x.own, x.sum = !shared, d.SHA256 // hydrate checked it against d
		return x
	}
	data, ok := parentPlain(dd, indexPath, d)
	if !ok {
		return &oldIndex{}
	}
	x := splitOldIndex(data, n)
	x.own, x.sum = true, d.SHA256
	return x
}

// readWithRoom reads file into an array with room beyond its end (index.PlainCap, as
// index.Gunzip leaves it), so that the next index can be spliced in place of this one.
func readWithRoom(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(st.Size())
	data := make([]byte, size, index.PlainCap(size))
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, err
	}
	return data, nil
}

// splitOldIndex splits the bytes of an index file, expecting about n stanzas.
func splitOldIndex(data []byte, n int) *oldIndex {
	x := &oldIndex{data: data}
	x.stanzas, x.sums, x.offs = make([][]byte, 0, n+1), make([][]byte, 0, n+1), make([]int, 0, n+1)
	for off := 0; off < len(data); {
		end := bytes.Index(data[off:], []byte("\n\n"))
		var st []byte
		if end < 0 {
			st = data[off:]
		} else {
			st = data[off : off+end+1]
		}
		x.stanzas = append(x.stanzas, st)
		x.offs = append(x.offs, off)
		x.sums = append(x.sums, stanzaField(st, "\nSHA256: "))
		off += len(st) + 1
	}
	return x
}

// attach notes members as the packages of the stanzas, when the file lists exactly them
// in order, each stanza naming its member's file and path: then locate walks both lists
// together, and a member it finds needs no second look at its stanza (at 100,000
// packages, a few cache misses each, read here once instead of twice).
func (x *oldIndex) attach(members []*manifest.Package) {
	if len(members) != len(x.stanzas) {
		return
	}
	for i, p := range members {
		if p.SHA256 != string(x.sums[i]) || p.Path != string(stanzaField(x.stanzas[i], "\nFilename: ")) {
			return
		}
	}
	x.members = members
}

// locate returns the number of the stanza of p, or -1. Calls come in canonical order.
func (x *oldIndex) locate(p *manifest.Package) int {
	if x.members != nil {
		for x.next < len(x.members) && manifest.ComparePackages(x.members[x.next], p) < 0 {
			x.next++
		}
		if x.next < len(x.members) && x.members[x.next].Equal(p) {
			return x.next // attach saw that the stanza names p's file and path
		}
		return -1
	}
	if x.bySum == nil {
		x.bySum = make(map[string]int, len(x.stanzas))
		for i, sum := range x.sums {
			x.bySum[string(sum)] = i
		}
	}
	// The stanza must describe this very file at this very path.
	i, ok := x.bySum[p.SHA256]
	if !ok || string(stanzaField(x.stanzas[i], "\nFilename: ")) != p.Path {
		return -1
	}
	return i
}

// phasedAs reports whether stanza i, which locate returned for a package, already carries
// that package's phasing: when the index lists exactly its members (attach), locate
// matched the member equal to the package, phasing included, and the index was written
// with it, so no stanza is searched for the field (docs/benchmarks.md, "Figures moved out
// of code comments").
func (x *oldIndex) phasedAs(i int) bool { return x.members != nil && i < len(x.members) }

// stanzaField returns the value of the field whose "\nName: " prefix is given, or nil.
// Packages stanzas end with Filename, Size, MD5sum, SHA1 and SHA256, so it looks at the
// last lines first: a stanza is a kilobyte, and this runs once per reused package.
func stanzaField(st []byte, prefix string) []byte {
	end := len(st) - 1 // the stanza's final newline
	for range 5 {
		if end <= 0 {
			break
		}
		start := bytes.LastIndexByte(st[:end], '\n')
		if start < 0 {
			break
		}
		if line := st[start:end]; bytes.HasPrefix(line, []byte(prefix)) {
			return line[len(prefix):]
		}
		end = start
	}
	i := bytes.LastIndex(st, []byte(prefix))
	if i < 0 {
		return nil
	}
	rest := st[i+len(prefix):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		return rest[:j]
	}
	return nil
}

// prefetch reads the tree's indexes of the previous release in the background, in the
// order writeIndexes visits them, while the inputs are listed: at 100,000 packages,
// reading and splitting the old index is a tenth of a second that the walk leaves a core
// free for. It stops before the indexes read exceed a budget, so that a repository of many
// large indexes does not hold them all at once; writeIndexes reads the rest itself. A nil
// *prefetch holds nothing.
type prefetch struct {
	mu      sync.Mutex
	pending map[string]chan *oldIndex // read, or to be read, and not taken yet
	dropped map[string]bool           // no longer wanted: not to be read
	quit    chan struct{}             // closed by stop
	done    chan struct{}             // closed when the reading goroutine returns
}

// prefetchBudget is how many bytes of old indexes a build reads ahead, at most.
var prefetchBudget int64 = 256 << 20

// startPrefetch starts reading ahead the Packages indexes of suites that prev lists, in
// the order of suites, on a goroutine that runs until it is done or stop is called. (A
// build that verifies reuses nothing, and starts none: startLoading.)
func startPrefetch(d dirs, suites []Suite, prev *manifest.Manifest, plains map[string]release.Digests, made *madeIndexes) *prefetch {
	pf := &prefetch{
		pending: map[string]chan *oldIndex{}, dropped: map[string]bool{},
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	if prev == nil {
		close(pf.done)
		return pf
	}
	type job struct {
		rel string
		ch  chan *oldIndex
	}
	var jobs []job
	budget := prefetchBudget
indexes:
	for _, s := range suites {
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				rel := "dists/" + s.Codename + "/" + comp + "/binary-" + arch + "/Packages"
				d, ok := plains[rel]
				if !ok {
					continue
				}
				if budget -= d.Size; budget < 0 {
					break indexes
				}
				j := job{rel, make(chan *oldIndex, 1)}
				pf.pending[rel] = j.ch
				jobs = append(jobs, j)
			}
		}
	}
	go func() {
		defer close(pf.done)
		for _, j := range jobs {
			select {
			case <-pf.quit:
				return
			default:
			}
			pf.mu.Lock()
			skip := pf.dropped[j.rel]
			pf.mu.Unlock()
			if !skip {
				j.ch <- made.load(d, j.rel, plains[j.rel])
			}
		}
	}()
	return pf
}

// take returns the prefetched index at rel, waiting for it, or nil if it was not
// prefetched.
func (pf *prefetch) take(rel string) *oldIndex {
	if pf == nil {
		return nil
	}
	pf.mu.Lock()
	ch := pf.pending[rel]
	delete(pf.pending, rel)
	pf.mu.Unlock()
	if ch == nil {
		return nil
	}
	return <-ch
}

// drop forgets the index at rel, which writeIndexes is done with: if it is not read yet,
// it will not be; if it is, it is garbage.
func (pf *prefetch) drop(rel string) {
	if pf == nil {
		return
	}
	pf.mu.Lock()
	if _, ok := pf.pending[rel]; ok {
		delete(pf.pending, rel)
		pf.dropped[rel] = true
	}
	pf.mu.Unlock()
}

// stop ends the reading ahead and waits for it.
func (pf *prefetch) stop() {
	if pf == nil {
		return
	}
	close(pf.quit)
	<-pf.done
}

// splice lays out the new index of stanzas in x's array, in place, and returns the
// stanzas as slices of it, one after the other, each followed by "\n", as index.Build
// then takes them without a copy: at 100,000 packages an index is 80 MB, and a build
// that kept the old one beside the new one would hold both at once. from[k] is the
// number of x's stanza that stanzas[k] is, or -1 for a stanza from elsewhere.
//
// It does so only when that is safe and worth it: nothing else holds x's array (own),
// the new index fits in its capacity, x's stanzas come in x's order, each at most once,
// and the others are few (they are copied aside first, since they may be anywhere).
// Otherwise it returns stanzas as they are. Either way x is spent: its array may have
// been overwritten.
//
// base, when it spliced in place (ok), says how many bytes at the start of the new index
// are those of x's at the same place (the stanzas before the first change) and how many
// at its end are the last of x's (the stanzas after the last change).
func (x *oldIndex) splice(stanzas [][]byte, from []int) (_ [][]byte, base index.Base, ok bool) {
	defer func() { *x = oldIndex{} }()
	if !x.own || len(stanzas) == 0 {
		return stanzas, index.Base{}, false
	}
	total, foreign, last := 0, 0, -1
	for k, st := range stanzas {
		total += len(st) + 1
		if from[k] < 0 {
			foreign += len(st)
			continue
		}
		if from[k] <= last || len(st) != len(x.stanzas[from[k]]) {
			return stanzas, index.Base{}, false
		}
		last = from[k]
	}
	if total > cap(x.data) || foreign > total/8 {
		return stanzas, index.Base{}, false
	}
	side := make([]byte, 0, foreign)
	for k, st := range stanzas {
		if from[k] < 0 {
			side = append(side, st...)
		}
	}
	buf := x.data[:max(len(x.data), total)]
	at := make([]int, len(stanzas)) // where each stanza goes
	n := 0
	same := -1
	for k, st := range stanzas {
		at[k] = n
		if same < 0 && (from[k] < 0 || x.offs[from[k]] != n) {
			same = n
		}
		n += len(st) + 1
	}
	if same < 0 {
		same = n
	}
	// The stanzas at the end that are x's last, each as far from the end as it was there.
	tail := 0
	for k := len(stanzas) - 1; k >= 0 && from[k] >= 0 && n-at[k] == len(x.data)-x.offs[from[k]]; k-- {
		tail = n - at[k]
	}
	base = index.Base{SHA256: x.sum, Head: same, Tail: tail}
	// A stanza moving towards the start cannot overwrite one still to move if they move
	// in order, first to last; one moving towards the end, if they move last to first.
	move := func(k int) {
		o, l := x.offs[from[k]], len(stanzas[k])
		copy(buf[at[k]:], buf[o:o+l])
		buf[at[k]+l] = '\n'
	}
	for k := range stanzas {
		if from[k] >= 0 && at[k] <= x.offs[from[k]] {
			move(k)
		}
	}
	for k := len(stanzas) - 1; k >= 0; k-- {
		if from[k] >= 0 && at[k] > x.offs[from[k]] {
			move(k)
		}
	}
	for k, st := range stanzas {
		l := len(st)
		if from[k] < 0 {
			copy(buf[at[k]:], side[:l])
			side = side[l:]
			buf[at[k]+l] = '\n'
		}
		stanzas[k] = buf[at[k] : at[k]+l]
	}
	return stanzas, base, true
}
