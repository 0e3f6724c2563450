package manifest

import (
	"math/bits"
	"strconv"
	"strings"
)

// The manifest of a large repository holds a table per package: 100,000 packages make
// 25 MB of TOML, which go-toml encodes and decodes more slowly than a whole incremental
// build may take (docs/benchmarks.md). So the canonical form is also written and read
// by the functions below. go-toml remains the authority: appendCanonical produces exactly
// the bytes go-toml's encoder produces (a test compares them), and parseCanonical accepts
// only input that is byte for byte what appendCanonical writes (plain literal strings,
// keys in struct order, [[package]] tables then [[file]] tables); anything else,
// including every malformed or hand-edited input, goes to go-toml's strict decoder, which
// gives the precise error with its line. A fuzz test checks that whatever parseCanonical
// accepts, go-toml decodes to the same manifest and appendCanonical writes back
// unchanged; the latter is what lets Parse check the id by hashing the input as it is.
//
// Strings are checked eight bytes at a time (see notPlain): the manifest's strings are
// tens of megabytes, and every encoding and decoding runs over all of them.

const (
	lo7  = 0x7f7f7f7f7f7f7f7f
	hi1  = 0x8080808080808080
	ones = 0x0101010101010101
)

// load64 reads s[i:i+8] as a little-endian word (the compiler makes it one load).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// between sets the high bit of each byte b of x with m < b < n, exactly, byte by byte
// (no carry crosses bytes). It needs 0 <= m <= 127 and 0 <= n <= 128.
func between(x uint64, m, n uint64) uint64 {
	low := x & lo7
	return (ones*(127+n) - low) & ^x & (low + ones*(127-m)) & hi1
}

// notPlain sets the high bit of each byte of x that is not plain (see plainByte), and
// perhaps of bytes after such a byte, where a borrow or carry crosses bytes; so the
// lowest set bit is exact, and so is whether any is set.
func notPlain(x uint64) uint64 {
	const q, dq, bs = ones * '\'', ones * '"', ones * '\\'
	return ((x-ones*0x20) & ^x | // below 0x20
		(x + ones) | x | // 0x7f and above
		(x^q-ones) & ^(x^q) |
		(x^dq-ones) & ^(x^dq) |
		(x^bs-ones) & ^(x^bs)) & hi1
}

// plainPrefix returns the length of the longest prefix of s made of plain bytes.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if bad := notPlain(load64(s, i)); bad != 0 {
			return i + bits.TrailingZeros64(bad)/8
		}
	}
	for ; i < len(s); i++ {
		if !plainByte[s[i]] {
			return i
		}
	}
	return i
}

// plainString reports whether go-toml writes s as a literal string 's' that
// parseCanonical reads back: printable ASCII without quotes or backslashes.
func plainString(s string) bool {
	n := len(s)
	if n < 8 {
		for i := 0; i < n; i++ {
			if !plainByte[s[i]] {
				return false
			}
		}
		return true
	}
	bad := notPlain(load64(s, n-8))
	for i := 0; i+8 <= n; i += 8 {
		bad |= notPlain(load64(s, i))
	}
	return bad == 0
}

// plainByte is plainString's test for one byte.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '\'' && c != '"' && c != '\\'
	}
	return t
}()

// The canonical layout, as go-toml writes it: literals and values alternate. The
// literals join the end of one line to the start of the next, so that the encoder writes
// and the decoder checks each with one operation.
const (
	lTop        = "schema = "
	lRepository = "\nrepository = '"
	lID         = "'\nid = '"
	lParent     = "'\nparent = '"
	lDate       = "'\ndate = '"
	lRequested  = "'\nrequested_date = '"
	lPackage    = "\n[[package]]\nsuite = '"
	lComponent  = "'\ncomponent = '"
	lName       = "'\nname = '"
	lVersion    = "'\nversion = '"
	lArch       = "'\narchitecture = '"
	lPath       = "'\npath = '"
	lSize       = "'\nsize = "
	lSHA256     = "\nsha256 = '"
	lPhased     = "'\nphased = '"
	lFile       = "\n[[file]]\npath = '"
	lPkgFile    = "\n[[package.file]]\npath = '"
	lEnd        = "'\n"
)

// canonicalSize is the length of m's canonical encoding (with the header), given its ID.
func canonicalSize(m *Manifest, id string) int {
	n := len(header) + len(lTop) + decimalLen(int64(m.Schema)) + len(lRepository) + len(m.Repository) +
		len(lID) + len(id) + len(lParent) + len(m.Parent) + len(lDate) + len(m.Date) + len(lEnd)
	if m.RequestedDate != "" {
		n += len(lRequested) + len(m.RequestedDate)
	}
	const pkgFixed = len(lPackage) + len(lComponent) + len(lName) + len(lVersion) + len(lArch) +
		len(lPath) + len(lSize) + len(lSHA256) + len(lEnd)
	for i := range m.Packages {
		p := &m.Packages[i]
		n += pkgFixed + len(p.Suite) + len(p.Component) + len(p.Name) + len(p.Version) +
			len(p.Architecture) + len(p.Path) + decimalLen(p.Size) + len(p.SHA256)
		if p.Phased != "" {
			n += len(lPhased) + len(p.Phased)
		}
		if len(p.Files) > 0 {
			n += filesSize(p.Files) + (len(lPkgFile)-len(lFile))*len(p.Files)
		}
	}
	return n + filesSize(m.Files)
}

// filesSize is the length of the canonical encoding of files.
func filesSize(files []File) int {
	const fileFixed = len(lFile) + len(lSize) + len(lSHA256) + len(lEnd)
	n := 0
	for i := range files {
		f := &files[i]
		n += fileFixed + len(f.Path) + decimalLen(f.Size) + len(f.SHA256)
	}
	return n
}

// decimalLen is the length of strconv.FormatInt(v, 10).
func decimalLen(v int64) int {
	n := 1
	u := uint64(v)
	if v < 0 {
		n++
		u = -u
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// appendCanonical appends m in go-toml's layout, with id as its ID, and returns the
// offset of the id in the result. ok is false, and b unusable, if a string of m other
// than its ID is not plain; the caller checks id.
func appendCanonical(b []byte, m *Manifest, id string) (out []byte, idAt int, ok bool) {
	b, idAt, ok = appendTop(b, m, id)
	for i := 0; ok && i < len(m.Packages); i++ {
		b, ok = appendPackage(b, &m.Packages[i])
	}
	for i := 0; ok && i < len(m.Files); i++ {
		b, ok = appendFile(b, &m.Files[i])
	}
	return b, idAt, ok
}

// appendTop appends the header and the top-level keys.
func appendTop(b []byte, m *Manifest, id string) (out []byte, idAt int, ok bool) {
	if !plainString(m.Repository) || !plainString(m.Parent) || !plainString(m.Date) || !plainString(m.RequestedDate) {
		return b, 0, false
	}
	b = append(b, header...)
	b = append(b, lTop...)
	b = strconv.AppendInt(b, int64(m.Schema), 10)
	b = append(b, lRepository...)
	b = append(b, m.Repository...)
	b = append(b, lID...)
	idAt = len(b)
	b = append(b, id...)
	b = append(b, lParent...)
	b = append(b, m.Parent...)
	b = append(b, lDate...)
	b = append(b, m.Date...)
	if m.RequestedDate != "" {
		b = append(b, lRequested...)
		b = append(b, m.RequestedDate...)
	}
	b = append(b, lEnd...)
	return b, idAt, true
}

func appendPackage(b []byte, p *Package) ([]byte, bool) {
	if !plainString(p.Suite) || !plainString(p.Component) || !plainString(p.Name) ||
		!plainString(p.Version) || !plainString(p.Architecture) || !plainString(p.Path) ||
		!plainString(p.SHA256) || !plainString(p.Phased) {
		return b, false
	}
	b = append(b, lPackage...)
	b = append(b, p.Suite...)
	b = append(b, lComponent...)
	b = append(b, p.Component...)
	b = append(b, lName...)
	b = append(b, p.Name...)
	b = append(b, lVersion...)
	b = append(b, p.Version...)
	b = append(b, lArch...)
	b = append(b, p.Architecture...)
	b = append(b, lPath...)
	b = append(b, p.Path...)
	b = append(b, lSize...)
	b = strconv.AppendInt(b, p.Size, 10)
	b = append(b, lSHA256...)
	b = append(b, p.SHA256...)
	if p.Phased != "" {
		b = append(b, lPhased...)
		b = append(b, p.Phased...)
	}
	b = append(b, lEnd...)
	for i := range p.Files {
		var ok bool
		if b, ok = appendTable(b, lPkgFile, &p.Files[i]); !ok {
			return b, false
		}
	}
	return b, true
}

func appendFile(b []byte, f *File) ([]byte, bool) { return appendTable(b, lFile, f) }

// appendTable appends a file table whose header literal is header.
func appendTable(b []byte, header string, f *File) ([]byte, bool) {
	if !plainString(f.Path) || !plainString(f.SHA256) {
		return b, false
	}
	b = append(b, header...)
	b = append(b, f.Path...)
	b = append(b, lSize...)
	b = strconv.AppendInt(b, f.Size, 10)
	b = append(b, lSHA256...)
	b = append(b, f.SHA256...)
	return append(b, lEnd...), true
}

// parseCanonical decodes data if it is exactly a canonical encoding; ok is false for
// anything else.
func parseCanonical(data []byte) (m *Manifest, ok bool) {
	m, _, ok = parseExact(string(data))
	return m, ok
}

// parseExact decodes s if it is exactly what appendCanonical writes for the manifest it
// returns; idAt is the offset of the id in s. Every decoded string is a substring of s:
// no allocation per field.
func parseExact(s string) (m *Manifest, idAt int, ok bool) {
	m, d, idAt, ok := parseTop(s)
	if !ok || !d.tables(m) {
		return nil, 0, false
	}
	return m, idAt, true
}

// parseTop reads the header and the top-level keys, returning the decoder positioned on
// the tables.
func parseTop(s string) (m *Manifest, d *decoder, idAt int, ok bool) {
	d = &decoder{s: s, ok: true}
	d.lit(header + lTop)
	schema := d.num()
	if schema > 1<<31 {
		return nil, nil, 0, false
	}
	m = &Manifest{Schema: int(schema)}
	d.lit(lRepository)
	m.Repository = d.str()
	d.lit(lID)
	idAt = d.pos
	m.ID = d.str()
	d.lit(lParent)
	m.Parent = d.str()
	d.lit(lDate)
	m.Date = d.str()
	if strings.HasPrefix(s[d.pos:], lRequested) {
		d.lit(lRequested)
		m.RequestedDate = d.str()
		d.ok = d.ok && m.RequestedDate != "" // written only when set
	}
	d.lit(lEnd)
	return m, d, idAt, d.ok
}

// file reads one file table whose header literal is header.
func (d *decoder) file(header string) File {
	var f File
	d.lit(header)
	f.Path = d.str()
	d.lit(lSize)
	f.Size = d.num()
	d.lit(lSHA256)
	f.SHA256 = d.str()
	d.lit(lEnd)
	return f
}

// tables reads the [[package]] and [[file]] tables to the end of the input.
func (d *decoder) tables(m *Manifest) bool {
	s := d.s
	if strings.HasPrefix(s[d.pos:], lPackage) {
		// Every table header holds two '[' (counted much faster than the headers); a
		// package table is at least 100 bytes, a bound that keeps a hostile input from
		// reserving more memory than its own size.
		n := min(strings.Count(s[d.pos:], "[")/2, len(s)/100+1)
		m.Packages = make([]Package, 0, n)
		for d.ok && strings.HasPrefix(s[d.pos:], lPackage) {
			m.Packages = append(m.Packages, Package{})
			p := &m.Packages[len(m.Packages)-1]
			d.lit(lPackage)
			p.Suite = d.str()
			d.lit(lComponent)
			p.Component = d.str()
			d.lit(lName)
			p.Name = d.str()
			d.lit(lVersion)
			p.Version = d.str()
			d.lit(lArch)
			p.Architecture = d.str()
			d.lit(lPath)
			p.Path = d.str()
			d.lit(lSize)
			p.Size = d.num()
			d.lit(lSHA256)
			p.SHA256 = d.str()
			if strings.HasPrefix(s[d.pos:], lPhased) {
				d.lit(lPhased)
				p.Phased = d.str()
				d.ok = d.ok && p.Phased != "" // written only when set
			}
			d.lit(lEnd)
			for d.ok && strings.HasPrefix(s[d.pos:], lPkgFile) {
				p.Files = append(p.Files, d.file(lPkgFile))
			}
		}
	}
	for d.ok && strings.HasPrefix(s[d.pos:], lFile) {
		m.Files = append(m.Files, d.file(lFile))
	}
	return d.ok && d.pos == len(s)
}

// decoder reads the canonical layout. After a mismatch ok is false, and what it reads
// is meaningless.
type decoder struct {
	s   string
	pos int
	ok  bool
}

// lit reads the literal l.
func (d *decoder) lit(l string) {
	if !strings.HasPrefix(d.s[d.pos:], l) {
		d.ok = false
		return
	}
	d.pos += len(l)
}

// str reads a plain string, up to the first byte that is not plain (a quote, if the
// layout is right).
func (d *decoder) str() string {
	n := plainPrefix(d.s[d.pos:])
	v := d.s[d.pos : d.pos+n]
	d.pos += n
	return v
}

// num reads a decimal integer as strconv.AppendInt writes it, without sign and of at
// most 18 digits.
func (d *decoder) num() int64 {
	rest := d.s[d.pos:]
	var v int64
	n := 0
	for ; n < len(rest) && '0' <= rest[n] && rest[n] <= '9'; n++ {
		v = v*10 + int64(rest[n]-'0')
	}
	if n == 0 || n > 18 || rest[0] == '0' && n > 1 {
		d.ok = false
		return 0
	}
	d.pos += n
	return v
}
