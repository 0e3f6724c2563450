package gate

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/armor-apt/armor/debian/relation"
	"pault.ag/go/debian/version"
)

// A Snapshot is a suite's packages kept between builds in the form a Universe reads
// without decoding them: a fixed-size record per package (where its fields lie in one
// block of text) and, for each architecture, the universe's ids and its lookups sorted by
// name (packages by name, providers, conflicters and the packages whose dependencies name
// each name), each entry a few integers. Opening one checks its checksum and that every
// position in it lies within it, then reads nothing more: a check decodes only the
// packages its solver reaches, and a change applies to it as a few packages left out and
// a few added (see Change), so that a one-package change costs the same at 100,000
// packages as at 100.
//
// The file is what the cache directory holds; it is trusted no more than that directory.
// Its CRC-32C (Castagnoli) detects corruption; its stamp (the writer's version) and the
// suite it names are for the caller to compare; a relation that no longer parses makes
// the check fail with an error, for the caller to check afresh.
type Snapshot struct {
	data  string // the whole file; every field is a part of it
	blob  string // the text the records and the lookups point into
	Stamp string // the writer's version, as given to EncodeSnapshot
	Suite string
	recs  string // len × recordSize bytes
	len   int
	// names lists, by name, the packages (their indexes) that have or provide it, of
	// every architecture.
	names index
	Archs []string
	archs []*snapArch
}

// snapArch is one architecture's universe in a snapshot.
type snapArch struct {
	name   string
	ids    string // u32 per universe id: its package's index, ascending
	byName string // u32 per universe id: the ids in order of name, then id
	// Lookups by name: entries of u32 name offset and length in blob, then the id, then
	// (provided only) the provided version's offset and length, none if unversioned.
	provided, conflicters, rdeps index
	essential                    string // u32 ids of the Essential packages
}

type index struct {
	data  string
	width int // bytes per entry
}

const (
	snapMagic  = "armor gate universe 1\n"
	recordSize = 4 + nFields*4 + 4
	nFields    = 10
)

// The fields of a record, in the order they lie in blob.
const (
	fSHA = iota
	fName
	fVersion
	fArch
	fFrom
	fPre
	fDep
	fConfl
	fBreaks
	fProv
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshot marks a snapshot that cannot be read: corrupt, truncated or of another
// encoding.
var ErrSnapshot = errors.New("not a snapshot of the check's packages, or a damaged one")

// EncodeSnapshot encodes the packages of a suite (each a binary package of one of archs
// or "all", in the order the caller will match them against, parsed by ParseStanza or
// decoded) with stamp, the writer's version.
func EncodeSnapshot(stamp, suite string, archs []string, pkgs []*Package) []byte {
	var blob strings.Builder
	blob.Grow(len(pkgs) * 192)
	offsets := map[string]uint32{}
	ref := func(s string) (uint32, uint32) {
		off, ok := offsets[s]
		if !ok {
			off = uint32(blob.Len())
			offsets[s] = off
			blob.WriteString(s)
		}
		return off, uint32(len(s))
	}
	// The header (magic, checksum, body's length), the body, then blob.
	body := make([]byte, len(snapMagic)+8, len(snapMagic)+8+len(pkgs)*(recordSize+96))
	copy(body, snapMagic)
	u32 := func(v uint32) { body = binary.LittleEndian.AppendUint32(body, v) }
	str := func(s string) { u32(uint32(len(s))); body = append(body, s...) }
	str(stamp)
	str(suite)
	u32(uint32(len(pkgs)))
	for _, p := range pkgs {
		fields := p.fields()
		u32(uint32(blob.Len()))
		for _, f := range fields {
			blob.WriteString(f)
		}
		for _, f := range fields {
			u32(uint32(len(f)))
		}
		ess := uint32(0)
		if p.Essential {
			ess = 1
		}
		u32(uint32(p.MultiArch) | ess<<8)
	}
	var names []entry
	for i, p := range pkgs {
		names = append(names, entry{name: p.Name, id: uint32(i)})
		for _, pr := range p.Provides {
			names = append(names, entry{name: pr.Name, id: uint32(i)})
		}
	}
	body = appendIndex(body, names, false, ref)
	u32(uint32(len(archs)))
	for _, arch := range archs {
		str(arch)
		body = appendArch(body, arch, pkgs, ref)
	}
	binary.LittleEndian.PutUint32(body[len(snapMagic)+4:], uint32(len(body)-len(snapMagic)-8))
	out := append(body, blob.String()...)
	binary.LittleEndian.PutUint32(out[len(snapMagic):], crc32.Checksum(out[len(snapMagic)+4:], castagnoli))
	return out
}

// fields returns what a record keeps of p, in the order of fSHA to fProv.
func (p *Package) fields() [nFields]string {
	if t := p.text; t != nil {
		return [nFields]string{p.SHA256, p.Name, p.Version, p.Architecture, p.From, t[0], t[1], t[2], t[3], t[4]}
	}
	var pre, dep string
	if p.lazy != nil {
		pre, dep = p.lazy[0], p.lazy[1]
	} else {
		pre, dep = joinDepends(p.PreDepends), joinDepends(p.Depends)
	}
	return [nFields]string{p.SHA256, p.Name, p.Version, p.Architecture, p.From, pre, dep,
		joinList(p.Conflicts), joinList(p.Breaks), joinList(p.Provides)}
}

func joinList(rs []relation.Relation) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

func joinDepends(rs [][]relation.Relation) string {
	parts := make([]string, len(rs))
	for i, alts := range rs {
		parts[i] = relation.Alternatives(alts)
	}
	return strings.Join(parts, ", ")
}

// entry is a lookup's entry while it is made.
type entry struct {
	name string
	id   uint32
	ver  string
}

// appendArch appends arch's universe: its ids, by name, and its lookups.
func appendArch(body []byte, arch string, pkgs []*Package, ref func(string) (uint32, uint32)) []byte {
	u32 := func(v uint32) { body = binary.LittleEndian.AppendUint32(body, v) }
	var ids []uint32
	for i, p := range pkgs {
		if p.Architecture == arch || p.Architecture == "all" {
			ids = append(ids, uint32(i))
		}
	}
	u32(uint32(len(ids)))
	for _, i := range ids {
		u32(i)
	}
	byName := make([]uint32, len(ids))
	for k := range byName {
		byName[k] = uint32(k)
	}
	byNameOf := func(a, b uint32) int { return strings.Compare(pkgs[ids[a]].Name, pkgs[ids[b]].Name) }
	if !slices.IsSortedFunc(byName, byNameOf) {
		slices.SortStableFunc(byName, byNameOf)
	}
	for _, k := range byName {
		u32(k)
	}
	var prov, confl []entry
	rdeps := make([]entry, 0, 3*len(ids))
	var essential []uint32
	for k, i := range ids {
		p, id := pkgs[i], uint32(k)
		for _, pr := range p.Provides {
			e := entry{name: pr.Name, id: id}
			if pr.Op == relation.Equal {
				e.ver = pr.Version
			}
			prov = append(prov, e)
		}
		for _, c := range append(slices.Clip(p.Conflicts), p.Breaks...) {
			confl = append(confl, entry{name: c.Name, id: id})
		}
		for _, field := range p.depFields() {
			for _, alts := range field {
				for _, r := range alts {
					rdeps = append(rdeps, entry{name: r.Name, id: id})
				}
			}
		}
		if p.Essential {
			essential = append(essential, id)
		}
	}
	body = appendIndex(body, prov, true, ref)
	body = appendIndex(body, confl, false, ref)
	body = appendIndex(body, rdeps, false, ref)
	u32(uint32(len(essential)))
	for _, id := range essential {
		u32(id)
	}
	return body
}

// appendIndex appends a lookup: es (made in order of id) sorted by name and id, with
// their versions (withVer), else once per name and id.
func appendIndex(body []byte, es []entry, withVer bool, ref func(string) (uint32, uint32)) []byte {
	es = sortByName(es)
	if !withVer {
		es = slices.Compact(es)
	}
	body = slices.Grow(body, 4+len(es)*20)
	body = binary.LittleEndian.AppendUint32(body, uint32(len(es)))
	var off, n uint32
	for i, e := range es {
		if i == 0 || e.name != es[i-1].name {
			off, n = ref(e.name)
		}
		body = binary.LittleEndian.AppendUint32(body, off)
		body = binary.LittleEndian.AppendUint32(body, n)
		body = binary.LittleEndian.AppendUint32(body, e.id)
		if withVer {
			off, n := ref(e.ver)
			body = binary.LittleEndian.AppendUint32(body, off)
			body = binary.LittleEndian.AppendUint32(body, n)
		}
	}
	return body
}

// sortByName sorts entries made in order of id by name, then id: a counting sort over
// the names, each sorted once, as a distribution's names are far fewer than the
// relations naming them.
func sortByName(es []entry) []entry {
	if slices.IsSortedFunc(es, func(a, b entry) int { return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.id, b.id)) }) {
		return es
	}
	group := make(map[string]int32, len(es)/4)
	var names []string
	of := make([]int32, len(es))
	var count []int
	for i, e := range es {
		g, ok := group[e.name]
		if !ok {
			g = int32(len(names))
			group[e.name] = g
			names = append(names, e.name)
			count = append(count, 0)
		}
		of[i] = g
		count[g]++
	}
	order := make([]int32, len(names))
	for g := range order {
		order[g] = int32(g)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	start := make([]int, len(names))
	at := 0
	for _, g := range order {
		start[g] = at
		at += count[g]
	}
	out := make([]entry, len(es))
	for i, e := range es {
		out[start[of[i]]] = e
		start[of[i]]++
	}
	return out
}

// OpenSnapshot opens the snapshot file at path, mapped into memory where the system
// allows it (the file's pages are then read from the page cache in place, neither
// copied nor left to the garbage collector), until the snapshot is unreachable. The
// strings it gives (packages, stamp, suite) are copies, which outlive it.
func OpenSnapshot(path string) (*Snapshot, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	s, err := DecodeSnapshot(data)
	if err != nil {
		unmap()
		return nil, err
	}
	runtime.AddCleanup(s, func(unmap func()) { unmap() }, unmap)
	return s, nil
}

// DecodeSnapshot opens an encoded snapshot. It reads data, which must not change
// afterwards, in place.
func DecodeSnapshot(data []byte) (*Snapshot, error) {
	if len(data) < len(snapMagic)+8 || string(data[:len(snapMagic)]) != snapMagic {
		return nil, fmt.Errorf("%w: no header", ErrSnapshot)
	}
	if crc32.Checksum(data[len(snapMagic)+4:], castagnoli) != binary.LittleEndian.Uint32(data[len(snapMagic):]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSnapshot)
	}
	return decodeSnapshot(unsafeString(data))
}

// decodeSnapshot reads a snapshot whose checksum holds, checking that every position
// in it lies within it, so that no later read can go out of bounds.
func decodeSnapshot(data string) (*Snapshot, error) {
	r := reader{s: data, i: len(snapMagic) + 4}
	bodyLen := int(r.u32())
	if r.err != nil || bodyLen > len(data)-r.i {
		return nil, fmt.Errorf("%w: truncated", ErrSnapshot)
	}
	s := &Snapshot{data: data, blob: data[r.i+bodyLen:]}
	r.s = data[:r.i+bodyLen]
	s.Stamp, s.Suite = strings.Clone(r.str()), strings.Clone(r.str())
	s.len = int(r.u32())
	s.recs = r.take(s.len, recordSize)
	for k := 0; k < s.len && r.err == nil; k++ {
		rec := s.recs[k*recordSize:]
		end := uint64(u32at(rec, 0))
		for f := range nFields {
			end += uint64(u32at(rec, 4+4*f))
		}
		if end > uint64(len(s.blob)) || u32at(rec, 4+4*nFields)&0xff > uint32(MAAllowed) {
			r.err = fmt.Errorf("%w: package %d lies outside the text", ErrSnapshot, k)
		}
	}
	s.names = r.index(12, s.len, len(s.blob))
	narch := int(r.u32())
	for a := 0; a < narch && r.err == nil; a++ {
		sa := &snapArch{name: strings.Clone(r.str())}
		m := int(r.u32())
		sa.ids, sa.byName = r.take(m, 4), r.take(m, 4)
		for k := 0; k < m && r.err == nil; k++ {
			if int(u32at(sa.ids, 4*k)) >= s.len || int(u32at(sa.byName, 4*k)) >= m {
				r.err = fmt.Errorf("%w: architecture %s: id out of range", ErrSnapshot, sa.name)
			}
		}
		sa.provided = r.index(20, m, len(s.blob))
		sa.conflicters = r.index(12, m, len(s.blob))
		sa.rdeps = r.index(12, m, len(s.blob))
		ne := int(r.u32())
		sa.essential = r.take(ne, 4)
		for k := 0; k < ne && r.err == nil; k++ {
			if int(u32at(sa.essential, 4*k)) >= m {
				r.err = fmt.Errorf("%w: architecture %s: id out of range", ErrSnapshot, sa.name)
			}
		}
		s.Archs = append(s.Archs, sa.name)
		s.archs = append(s.archs, sa)
	}
	if r.err == nil && r.i != len(r.s) {
		r.err = fmt.Errorf("%w: %d bytes left over", ErrSnapshot, len(r.s)-r.i)
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// reader reads a snapshot's body; its first error stops it.
type reader struct {
	s   string
	i   int
	err error
}

func (r *reader) u32() uint32 {
	if r.err != nil || len(r.s)-r.i < 4 {
		r.fail()
		return 0
	}
	v := u32at(r.s, r.i)
	r.i += 4
	return v
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", ErrSnapshot)
	}
}

// take returns n entries of size bytes.
func (r *reader) take(n, size int) string {
	if r.err != nil || n < 0 || uint64(n)*uint64(size) > uint64(len(r.s)-r.i) {
		r.fail()
		return ""
	}
	out := r.s[r.i : r.i+n*size]
	r.i += n * size
	return out
}

func (r *reader) str() string { return r.take(int(r.u32()), 1) }

// index reads a lookup of entries of width bytes: names and versions within blob (of
// size blobLen), ids below m.
func (r *reader) index(width, m, blobLen int) index {
	n := int(r.u32())
	x := index{data: r.take(n, width), width: width}
	for k := 0; k < n && r.err == nil; k++ {
		e := x.data[k*width:]
		bad := uint64(u32at(e, 0))+uint64(u32at(e, 4)) > uint64(blobLen) || int(u32at(e, 8)) >= m
		if width == 20 {
			bad = bad || uint64(u32at(e, 12))+uint64(u32at(e, 16)) > uint64(blobLen)
		}
		if bad {
			r.err = fmt.Errorf("%w: a lookup points outside the snapshot", ErrSnapshot)
		}
	}
	return x
}

// unsafeString returns data as a string without copying it: the caller never changes
// data afterwards. A snapshot is tens of megabytes at 100,000 packages, and a check reads
// a few hundred of its records.
func unsafeString(data []byte) string { return unsafe.String(unsafe.SliceData(data), len(data)) }

func u32at(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

// Len is the number of packages.
func (s *Snapshot) Len() int { return s.len }

// field returns field f of package k.
func (s *Snapshot) field(k, f int) string {
	rec := s.recs[k*recordSize:]
	off := int(u32at(rec, 0))
	for j := range f {
		off += int(u32at(rec, 4+4*j))
	}
	return s.blob[off : off+int(u32at(rec, 4+4*f))]
}

// SHA256 returns package k's .deb digest; the string is valid while the snapshot is.
func (s *Snapshot) SHA256(k int) string { return s.field(k, fSHA) }

// Package decodes package k.
func (s *Snapshot) Package(k int) (*Package, error) {
	var f [nFields]string
	for j := range f {
		f[j] = strings.Clone(s.field(k, j))
	}
	return packageOf(f, u32at(s.recs[k*recordSize:], 4+4*nFields))
}

// packageOf makes a package of the fields of a record.
func packageOf(f [nFields]string, flags uint32) (*Package, error) {
	p := &Package{SHA256: f[fSHA], Name: f[fName], Version: f[fVersion], Architecture: f[fArch], From: f[fFrom]}
	p.MultiArch, p.Essential = MultiArch(flags&0xff), flags>>8&1 == 1
	if p.MultiArch > MAAllowed || flags>>9 != 0 {
		return p, fmt.Errorf("%w: package %s: flags %#x", ErrSnapshot, p.Name, flags)
	}
	var err error
	if p.ver, err = version.Parse(p.Version); err != nil {
		return p, fmt.Errorf("%w: package %s: version %q: %w", ErrSnapshot, p.Name, p.Version, err)
	}
	p.verSet = true
	if p.PreDepends, err = relation.ParseDepends(f[fPre]); err == nil {
		if p.Depends, err = relation.ParseDepends(f[fDep]); err == nil {
			if p.Conflicts, err = relation.ParseList(f[fConfl]); err == nil {
				if p.Breaks, err = relation.ParseList(f[fBreaks]); err == nil {
					p.Provides, err = parseProvides(f[fProv])
				}
			}
		}
	}
	if err != nil {
		return p, fmt.Errorf("%w: package %s: %w", ErrSnapshot, p.Name, err)
	}
	p.text = &[5]string{f[fPre], f[fDep], f[fConfl], f[fBreaks], f[fProv]}
	return p, nil
}

// arch returns the snapshot's universe of arch, nil if it has none.
func (s *Snapshot) arch(name string) *snapArch {
	for _, a := range s.archs {
		if a.name == name {
			return a
		}
	}
	return nil
}

func (a *snapArch) len() int         { return len(a.ids) / 4 }
func (a *snapArch) pkg(id int32) int { return int(u32at(a.ids, 4*int(id))) }
func (a *snapArch) nth(k int) int32  { return int32(u32at(a.byName, 4*k)) }
func (x index) len() int             { return len(x.data) / x.width }
func (x index) id(k int) int32       { return int32(u32at(x.data, k*x.width+8)) }
func (x index) str(blob string, k, at int) string {
	off := int(u32at(x.data, k*x.width+at))
	return blob[off : off+int(u32at(x.data, k*x.width+at+4))]
}

// lookup returns the ids of a's packages named name, in order.
func (s *Snapshot) lookup(a *snapArch, name string) []int32 {
	m := a.len()
	i := searchIndex(m, func(k int) int { return strings.Compare(s.field(a.pkg(a.nth(k)), fName), name) })
	var out []int32
	for ; i < m && s.field(a.pkg(a.nth(i)), fName) == name; i++ {
		out = append(out, a.nth(i))
	}
	return out
}

// entries returns the positions in x of the entries for name.
func (s *Snapshot) entries(x index, name string) (lo, hi int) {
	n := x.len()
	lo = searchIndex(n, func(k int) int { return strings.Compare(x.str(s.blob, k, 0), name) })
	for hi = lo; hi < n && x.str(s.blob, hi, 0) == name; hi++ {
	}
	return lo, hi
}

// searchIndex returns the first k in [0, n) for which cmp(k) >= 0, n if none.
func searchIndex(n int, cmp func(k int) int) int {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cmp(mid) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Sum is the snapshot's checksum, which names it in a change (see EncodeChange).
func (s *Snapshot) Sum() uint32 { return u32at(s.data, len(snapMagic)) }

const changeMagic = "armor gate change 1\n"

// EncodeChange encodes a release (its manifest's ID) as a snapshot (sum, its Sum)
// changed: the snapshot's packages but those gone (indexes, in order), with extra. A
// build keeps it beside the snapshot, so that the next check finds its parent without
// writing the snapshot again.
func EncodeChange(sum uint32, release string, gone []int, extra []*Package) []byte {
	b := []byte(changeMagic)
	b = binary.LittleEndian.AppendUint32(b, 0) // the checksum, below
	b = binary.LittleEndian.AppendUint32(b, sum)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(release)))
	b = append(b, release...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(gone)))
	for _, k := range gone {
		b = binary.LittleEndian.AppendUint32(b, uint32(k))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(extra)))
	for _, p := range extra {
		ess := uint32(0)
		if p.Essential {
			ess = 1
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(p.MultiArch)|ess<<8)
		for _, f := range p.fields() {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	binary.LittleEndian.PutUint32(b[len(changeMagic):], crc32.Checksum(b[len(changeMagic)+4:], castagnoli))
	return b
}

// DecodeChange decodes what EncodeChange made for snap: an error wrapping ErrSnapshot
// if it is damaged or was made for another snapshot.
func DecodeChange(data []byte, snap *Snapshot) (release string, gone []int, extra []*Package, err error) {
	if len(data) < len(changeMagic)+4 || string(data[:len(changeMagic)]) != changeMagic ||
		crc32.Checksum(data[len(changeMagic)+4:], castagnoli) != binary.LittleEndian.Uint32(data[len(changeMagic):]) {
		return "", nil, nil, fmt.Errorf("%w: a change that is damaged or of another encoding", ErrSnapshot)
	}
	r := reader{s: string(data), i: len(changeMagic) + 4}
	if r.u32() != snap.Sum() {
		return "", nil, nil, fmt.Errorf("%w: a change of another snapshot", ErrSnapshot)
	}
	release = r.str()
	n := int(r.u32())
	for k := 0; k < n && r.err == nil; k++ {
		i := int(r.u32())
		if i >= snap.Len() || len(gone) > 0 && i <= gone[len(gone)-1] {
			return "", nil, nil, fmt.Errorf("%w: a change's package %d out of range or order", ErrSnapshot, i)
		}
		gone = append(gone, i)
	}
	n = int(r.u32())
	for k := 0; k < n && r.err == nil; k++ {
		flags := r.u32()
		var f [nFields]string
		for j := range f {
			f[j] = r.str()
		}
		if r.err != nil {
			break
		}
		p, err := packageOf(f, flags)
		if err != nil {
			return "", nil, nil, err
		}
		extra = append(extra, p)
	}
	if r.err == nil && r.i != len(r.s) {
		r.err = fmt.Errorf("%w: %d bytes left over", ErrSnapshot, len(r.s)-r.i)
	}
	if r.err != nil {
		return "", nil, nil, r.err
	}
	return release, gone, extra, nil
}

// Find returns the index of the package listed in from ("suite/component") with the
// name, version and architecture, for a snapshot written in the order of those four (a
// manifest's order).
func (s *Snapshot) Find(from, name, version, arch string) (int, bool) {
	key := func(k int) int {
		return cmp.Or(strings.Compare(s.field(k, fFrom), from), strings.Compare(s.field(k, fName), name),
			strings.Compare(s.field(k, fVersion), version), strings.Compare(s.field(k, fArch), arch))
	}
	k := searchIndex(s.len, key)
	return k, k < s.len && key(k) == 0
}
