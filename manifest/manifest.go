package manifest

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SchemaVersion is the manifest format this code writes and the only one it reads.
const SchemaVersion = 1

// Manifest describes one release of one repository. Once recorded it never changes.
type Manifest struct {
	Schema     int    `toml:"schema"`
	Repository string `toml:"repository"`
	// ID is the hex SHA-256 of the canonical encoding of the manifest with ID empty.
	ID string `toml:"id"`
	// Parent is the ID of the release this one was built from; empty for the first.
	Parent string `toml:"parent"`
	// Date is the release's date, the Date of its Release files: the date its build was
	// asked for (SOURCE_DATE_EPOCH, armor.toml's date or the clock), or a second after
	// the parent's when that was not later. RFC 3339 in UTC.
	Date string `toml:"date"`
	// RequestedDate is the date the build was asked for, set only when Date differs from
	// it (two builds in one second, a chain of builds at one SOURCE_DATE_EPOCH), so that
	// the next build asked for the same date is told from one asked for an older date,
	// which armor build refuses (gen/dates.go). RFC 3339 in UTC; empty otherwise.
	RequestedDate string    `toml:"requested_date,omitempty"`
	Packages      []Package `toml:"package,omitempty"`
	Files         []File    `toml:"file,omitempty"`
}

// Package is one package in one suite and component. Architecture is the package's own
// (so "all" appears once, though it is listed in every binary-* index), or "source" for
// a source package, whose Path is its .dsc and whose Files are the other files the .dsc
// names (tarballs, patches), each in the pool beside it.
type Package struct {
	Suite        string `toml:"suite"`
	Component    string `toml:"component"`
	Name         string `toml:"name"`
	Version      string `toml:"version"`
	Architecture string `toml:"architecture"`
	Path         string `toml:"path"`
	Size         int64  `toml:"size"`
	SHA256       string `toml:"sha256"`
	// Phased is the Phased-Update-Percentage of the package's stanza ("0" to "99"), set
	// by armor phase; empty for none (every client takes the update).
	Phased string `toml:"phased,omitempty"`
	// Files are the further pool files of a source package; none for a binary package.
	// Manifests without source packages encode exactly as before the field existed.
	Files []File `toml:"file,omitempty"`
}

// Equal reports whether p and q are the same package entry, field for field.
func (p *Package) Equal(q *Package) bool {
	return p.Suite == q.Suite && p.Component == q.Component && p.Name == q.Name &&
		p.Version == q.Version && p.Architecture == q.Architecture && p.Path == q.Path &&
		p.Size == q.Size && p.SHA256 == q.SHA256 && p.Phased == q.Phased && slices.Equal(p.Files, q.Files)
}

// EqualPackages reports whether two package lists are equal entry for entry.
func EqualPackages(a, b []Package) bool {
	return slices.EqualFunc(a, b, func(p, q Package) bool { return p.Equal(&q) })
}

// File is one generated file of the tree (an index, Release, InRelease, a by-hash copy).
type File struct {
	Path   string `toml:"path"`
	Size   int64  `toml:"size"`
	SHA256 string `toml:"sha256"`
}

// Object is what a path is served as: a content-addressed blob.
type Object struct {
	SHA256 string
	Size   int64
}

// Key identifies a package within a release; two different files with the same Key are
// a conflict.
type Key struct {
	Suite, Component, Name, Version, Architecture string
}

// Key returns the package's identity.
func (p Package) Key() Key {
	return Key{p.Suite, p.Component, p.Name, p.Version, p.Architecture}
}

// Paths returns every served path of the release with its object: the generated files
// and the pool files, each once.
func (m *Manifest) Paths() map[string]Object {
	out := make(map[string]Object, len(m.Files)+len(m.Packages))
	for _, p := range m.Packages {
		out[p.Path] = Object{p.SHA256, p.Size}
		for _, f := range p.Files {
			out[f.Path] = Object{f.SHA256, f.Size}
		}
	}
	for _, f := range m.Files {
		out[f.Path] = Object{f.SHA256, f.Size}
	}
	return out
}

// Objects returns the distinct objects of the release, sorted by digest.
func (m *Manifest) Objects() []Object {
	seen := make(map[string]bool, len(m.Files)+len(m.Packages))
	var out []Object
	m.EachObject(func(o Object) {
		if !seen[o.SHA256] {
			seen[o.SHA256] = true
			out = append(out, o)
		}
	})
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.SHA256, b.SHA256) })
	return out
}

// EachObject calls fn with the object of every served path of the release, in manifest
// order: an object served at several paths comes once for each. It is Objects without
// the set and the sorting, for a caller that needs neither.
func (m *Manifest) EachObject(fn func(Object)) {
	for _, p := range m.Packages {
		fn(Object{p.SHA256, p.Size})
		for _, f := range p.Files {
			fn(Object{f.SHA256, f.Size})
		}
	}
	for _, f := range m.Files {
		fn(Object{f.SHA256, f.Size})
	}
}

// Sort puts packages and files in canonical order: packages by suite, component, name,
// version string, architecture and path; files by path. Already sorted lists, the usual
// case, are only checked.
func (m *Manifest) Sort() {
	if !packagesSorted(m.Packages) {
		slices.SortFunc(m.Packages, comparePackages)
	}
	if !filesSorted(m.Files) {
		slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	}
}

// packagesSorted and filesSorted are slices.IsSortedFunc without copying entries.
func packagesSorted(ps []Package) bool {
	for i := 1; i < len(ps); i++ {
		if ComparePackages(&ps[i], &ps[i-1]) < 0 {
			return false
		}
	}
	return true
}

func filesSorted(fs []File) bool {
	for i := 1; i < len(fs); i++ {
		if fs[i].Path < fs[i-1].Path {
			return false
		}
	}
	return true
}

func comparePackages(a, b Package) int { return ComparePackages(&a, &b) }

// ComparePackages is the canonical order of a manifest's packages: by Key's fields, in
// order, then by path. It stops at the first field that differs.
func ComparePackages(a, b *Package) int {
	if c := CompareKeys(a, b); c != 0 {
		return c
	}
	return strings.Compare(a.Path, b.Path)
}

// CompareKeys orders packages by their Key's fields, in order.
func CompareKeys(a, b *Package) int {
	if c := strings.Compare(a.Suite, b.Suite); c != 0 {
		return c
	}
	if c := strings.Compare(a.Component, b.Component); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Version, b.Version); c != 0 {
		return c
	}
	return strings.Compare(a.Architecture, b.Architecture)
}

// ValidPath reports whether p is a clean, relative, slash-separated tree path: no
// empty, "." or ".." segment, no backslash or NUL.
func ValidPath(p string) bool {
	if p == "" {
		return false
	}
	seg := 0 // start of the current segment
	for i := 0; i < len(p); i++ {
		switch pathByte[p[i]] {
		case pathSlash:
			if !validSegment(p[seg:i]) {
				return false
			}
			seg = i + 1
		case pathBad:
			return false
		}
	}
	return validSegment(p[seg:])
}

func validSegment(s string) bool {
	return len(s) > 2 || len(s) > 0 && s != "." && s != ".."
}

const (
	pathOK = iota
	pathSlash
	pathBad
)

var pathByte = func() (t [256]uint8) {
	t['/'] = pathSlash
	t['\\'] = pathBad
	t[0] = pathBad
	return t
}()

// label names entry e (packages, then files, counted together) in errors. It is formatted
// only when an error is returned, since Validate runs over every entry of large manifests.
func (m *Manifest) label(e int) string {
	if e < len(m.Packages) {
		p := &m.Packages[e]
		return fmt.Sprintf("package %d (%s %s %s in %s/%s)", e+1, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
	}
	e -= len(m.Packages)
	return fmt.Sprintf("file %d (%s)", e+1, m.Files[e].Path)
}

// ValidDigest reports whether s is a lowercase hex SHA-256.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	// Eight bytes at a time: each must be a digit or a to f.
	for i := 0; i < 64; i += 8 {
		x := load64(s, i)
		if between(x, '0'-1, '9'+1)|between(x, 'a'-1, 'f'+1) != hi1 {
			return false
		}
	}
	return true
}

// Validate checks the manifest's internal consistency: schema, digests, sizes, paths,
// canonical order, no duplicate identity, and no path served as two different objects.
// It does not check the ID; see VerifyID.
//
// The error is the one a check of each entry in turn meets first. Large manifests are
// checked on all cores, a part each, and the paths served twice are looked for at the
// end (see firstConflict); the result is the same.
func (m *Manifest) Validate() error {
	if m.Schema != SchemaVersion {
		return fmt.Errorf("schema %d is not supported (this armor reads schema %d)", m.Schema, SchemaVersion)
	}
	if m.Repository == "" {
		return fmt.Errorf("repository is empty")
	}
	if m.Parent != "" && !ValidDigest(m.Parent) {
		return fmt.Errorf("parent %q is not a sha256 release id", m.Parent)
	}
	if err := m.checkRequestedDate(); err != nil {
		return err
	}
	n := len(m.Packages) + len(m.Files)
	if err := m.checkAll(min(runtime.GOMAXPROCS(0), n/(1<<14))); err != nil {
		return err
	}
	if err := m.checkPhased(); err != nil {
		return err
	}
	return m.checkPackageFiles()
}

// checkRequestedDate checks that requested_date, when set, is a time in RFC 3339 before
// date: a build records it only when it dated the release later than asked.
func (m *Manifest) checkRequestedDate() error {
	if m.RequestedDate == "" {
		return nil
	}
	r, err := time.Parse(time.RFC3339, m.RequestedDate)
	if err != nil {
		return fmt.Errorf("requested_date %q is not an RFC 3339 time", m.RequestedDate)
	}
	if d, err := time.Parse(time.RFC3339, m.Date); err == nil && !r.Before(d) {
		return fmt.Errorf("requested_date %s is not before date %s: it is written only for a release dated later than asked", m.RequestedDate, m.Date)
	}
	return nil
}

// checkPhased checks that every Phased is a whole percentage from 0 to 99, as apt reads
// Phased-Update-Percentage.
func (m *Manifest) checkPhased() error {
	for i := range m.Packages {
		p := m.Packages[i].Phased
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 99 || strconv.Itoa(n) != p {
			return fmt.Errorf("%s: phased %q is not a percentage from 0 to 99", m.label(i), p)
		}
	}
	return nil
}

// checkPackageFiles checks the further pool files of source packages: each a clean pool
// path with a digest, and no path served as two objects (by another package's file, by a
// package itself, or by a generated file). Only manifests with source packages pay for it.
func (m *Manifest) checkPackageFiles() error {
	var paths map[string]Object
	for i := range m.Packages {
		p := &m.Packages[i]
		if len(p.Files) == 0 {
			continue
		}
		if paths == nil {
			paths = m.topPaths()
		}
		for _, f := range p.Files {
			if !strings.HasPrefix(f.Path, "pool/") {
				return fmt.Errorf("%s: file %q is not under pool/", m.label(i), f.Path)
			}
			if msg, arg := checkObject(f.Path, f.SHA256, f.Size); msg != "" {
				return fmt.Errorf("%s: file: "+msg, m.label(i), arg)
			}
			o := Object{f.SHA256, f.Size}
			if prev, ok := paths[f.Path]; ok && prev != o {
				return fmt.Errorf("%s: path %s is listed as two different objects", m.label(i), f.Path)
			}
			paths[f.Path] = o
		}
	}
	return nil
}

// topPaths maps the paths of the packages themselves and of the generated files.
func (m *Manifest) topPaths() map[string]Object {
	out := make(map[string]Object, len(m.Packages)+len(m.Files))
	for _, p := range m.Packages {
		out[p.Path] = Object{p.SHA256, p.Size}
	}
	for _, f := range m.Files {
		out[f.Path] = Object{f.SHA256, f.Size}
	}
	return out
}

// checkAll checks the entries in the given number of parts at once.
func (m *Manifest) checkAll(parts int) error {
	n := len(m.Packages) + len(m.Files)
	var keys []uint64 // see firstConflict
	if n < 1<<conflictBits {
		keys = make([]uint64, n)
	}
	seed := maphash.MakeSeed()
	first := entryError{e: n}
	if parts > 1 {
		found := make([]entryError, parts)
		var wg sync.WaitGroup
		for i := range parts {
			wg.Go(func() { found[i] = m.checkEntries(i*n/parts, (i+1)*n/parts, keys, seed) })
		}
		wg.Wait()
		for _, f := range found {
			if f.err != nil && f.e < first.e {
				first = f
			}
		}
	} else {
		first = m.checkEntries(0, n, keys, seed)
	}
	// Entries after the first failing one were not all checked, and do not matter.
	last := min(first.e, n-1)
	if keys != nil {
		keys = keys[:last+1]
	}
	if c := m.firstConflict(keys, last); c >= 0 && (c < first.e || c == first.e && first.late) {
		return fmt.Errorf("%s: path %s is listed as two different objects", m.label(c), m.entryPath(c))
	}
	return first.err
}

// entryError is the first error checkEntries meets.
type entryError struct {
	e    int   // the entry (packages, then files, counted together); the end if none
	late bool  // met after the place of the path conflict check in the entry's checks
	err  error // nil if none
}

// checkEntries checks entries lo to hi-1 (packages, then files), all but the path
// conflicts, stopping at the first error. It sets keys[e] for each entry e it checks, if
// keys is not nil.
func (m *Manifest) checkEntries(lo, hi int, keys []uint64, seed maphash.Seed) entryError {
	fail := func(e int, late bool, format string, args ...any) entryError {
		return entryError{e, late, fmt.Errorf("%s: "+format, append([]any{m.label(e)}, args...)...)}
	}
	for i := lo; i < min(hi, len(m.Packages)); i++ {
		p := &m.Packages[i]
		if keys != nil {
			keys[i] = conflictKey(seed, p.Path, i)
		}
		if p.Suite == "" || p.Component == "" || p.Name == "" || p.Version == "" || p.Architecture == "" {
			return fail(i, false, "suite, component, name, version and architecture are required")
		}
		// Packages must be in canonical order (checked below), so a package listed twice
		// stands next to itself.
		order := -1 // compared with the previous package
		if i > 0 {
			order = CompareKeys(&m.Packages[i-1], p)
		}
		if order == 0 {
			return fail(i, false, "listed twice")
		}
		if !strings.HasPrefix(p.Path, "pool/") {
			return fail(i, false, "path %q is not under pool/", p.Path)
		}
		if msg, arg := checkObject(p.Path, p.SHA256, p.Size); msg != "" {
			return fail(i, false, msg, arg)
		}
		if order > 0 {
			return fail(i, true, "packages are not in canonical order")
		}
	}
	for e := max(lo, len(m.Packages)); e < hi; e++ {
		i := e - len(m.Packages)
		f := &m.Files[i]
		if keys != nil {
			keys[e] = conflictKey(seed, f.Path, e)
		}
		if msg, arg := checkObject(f.Path, f.SHA256, f.Size); msg != "" {
			return fail(e, false, msg, arg)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fail(e, true, "files are not sorted by path, or listed twice")
		}
	}
	return entryError{e: len(m.Packages) + len(m.Files)}
}

// checkObject checks an entry's path, digest and size, returning the problem's format
// and argument.
func checkObject(path, sum string, size int64) (string, any) {
	switch {
	case !ValidPath(path):
		return "path %q is not a clean relative path", path
	case !ValidDigest(sum):
		return "sha256 %q is not 64 lowercase hex digits", sum
	case size < 0:
		return "negative size %d", size
	}
	return "", nil
}

// entryPath and entryObject read entry e (packages, then files).
func (m *Manifest) entryPath(e int) string {
	if e < len(m.Packages) {
		return m.Packages[e].Path
	}
	return m.Files[e-len(m.Packages)].Path
}

func (m *Manifest) entryObject(e int) Object {
	if e < len(m.Packages) {
		return Object{m.Packages[e].SHA256, m.Packages[e].Size}
	}
	f := &m.Files[e-len(m.Packages)]
	return Object{f.SHA256, f.Size}
}

// conflictBits is the width of the entry number in a conflict key.
const conflictBits = 24

// conflictKey is entry e's word for firstConflict: a hash of its path above e.
func conflictKey(seed maphash.Seed, path string, e int) uint64 {
	return maphash.String(seed, path)&^(1<<conflictBits-1) | uint64(e)
}

// firstConflict returns the first entry, up to last, whose path an earlier entry lists
// as a different object, or -1. A path may be listed more than once (one pool file in two
// suites), always as the same object. keys holds conflictKey of entries 0 to last, or is
// nil for manifests too large for them.
//
// A map[string]Object of 100,000 paths cost more than the rest of Validate together
// (random accesses to megabytes). Instead a stable radix sort of the keys on their hash
// brings the entries of each path together, still in entry order.
func (m *Manifest) firstConflict(keys []uint64, last int) int {
	if keys == nil {
		return m.firstConflictMap(last)
	}
	n := len(keys)
	tmp := make([]uint64, n)
	for shift := conflictBits; shift < 64; shift += 8 {
		var count [256]int
		for _, k := range keys {
			count[byte(k>>shift)]++
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for _, k := range keys {
			d := byte(k >> shift)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	first := -1
	var claimants []int // the first entry of each distinct path in a run of one hash
	for i := 0; i < n; {
		j := i + 1
		for j < n && keys[j]>>conflictBits == keys[i]>>conflictBits {
			j++
		}
		if j-i > 1 {
			claimants = claimants[:0]
		entries:
			for _, k := range keys[i:j] {
				e := int(k & (1<<conflictBits - 1))
				for _, c := range claimants {
					if m.entryPath(c) == m.entryPath(e) {
						if m.entryObject(c) != m.entryObject(e) && (first < 0 || e < first) {
							first = e
						}
						continue entries
					}
				}
				claimants = append(claimants, e)
			}
		}
		i = j
	}
	return first
}

// firstConflictMap is firstConflict with a map.
func (m *Manifest) firstConflictMap(last int) int {
	paths := make(map[string]Object)
	for e := 0; e <= last; e++ {
		p, o := m.entryPath(e), m.entryObject(e)
		if prev, ok := paths[p]; !ok {
			paths[p] = o
		} else if prev != o {
			return e
		}
	}
	return -1
}
