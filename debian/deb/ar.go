package deb

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz/lzma"
)

const (
	arMagic     = "!<arch>\n"
	arHeaderLen = 60
	// maxControlFile bounds the control file that is read into memory.
	maxControlFile = 4 << 20
	// maxControlTar bounds the decompressed bytes read from control.tar while
	// looking for the control file, so that a compression bomb cannot spin.
	maxControlTar = 64 << 20
)

// scanner walks a .deb as a stream: every byte goes through the digester once,
// the control member is decompressed on the way, the rest is skipped.
type scanner struct {
	d   *digester
	br  *bufio.Reader
	off int64 // offset of the next unread byte of the archive
	hdr [arHeaderLen]byte
	gz  *gzip.Reader
}

var scanners = sync.Pool{New: func() any {
	d := newDigester()
	return &scanner{d: d, br: bufio.NewReaderSize(d, 256<<10)}
}}

func getScanner(r io.Reader) *scanner {
	s := scanners.Get().(*scanner)
	s.d.reset(r)
	s.br.Reset(s.d)
	s.off = 0
	return s
}

func putScanner(s *scanner) {
	s.d.r = nil
	s.br.Reset(nil)
	scanners.Put(s)
}

// notDeb and truncated build the errors for malformed input.
func notDeb(name, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", name, ErrNotDeb, fmt.Sprintf(format, args...))
}

func truncated(name, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %w: %s", name, ErrTruncated, ErrNotDeb, fmt.Sprintf(format, args...))
}

// scan reads the whole archive and returns the raw control file and the paths data.tar
// lists (see readData). Member order is
// checked as dpkg-deb checks it: debian-binary first, then control.tar, then
// data.tar; members whose names start with "_" may appear after debian-binary.
func (s *scanner) scan(name string) (control []byte, files []string, err error) {
	if _, err := io.ReadFull(s.br, s.hdr[:len(arMagic)]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, nil, notDeb(name, "too short to be an ar archive")
		}
		return nil, nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if string(s.hdr[:len(arMagic)]) != arMagic {
		return nil, nil, notDeb(name, "no ar archive signature")
	}
	s.off = int64(len(arMagic))
	var sawBinary, sawData bool
	for {
		memberName, size, err := s.next(name)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		m := &member{br: s.br, n: size}
		switch {
		case !sawBinary:
			if memberName != "debian-binary" {
				return nil, nil, notDeb(name, "first ar member is %q, not debian-binary", memberName)
			}
			err = s.readBinaryVersion(name, m)
			sawBinary = true
		case strings.HasPrefix(memberName, "_"):
			// Reserved for local additions; dpkg ignores them.
		case strings.HasPrefix(memberName, "control.tar"):
			if control != nil || sawData {
				return nil, nil, notDeb(name, "unexpected second or misplaced ar member %q", memberName)
			}
			control, err = s.readControl(name, memberName, m)
		case strings.HasPrefix(memberName, "data.tar"):
			if control == nil {
				return nil, nil, notDeb(name, "ar member %q comes before control.tar", memberName)
			}
			if sawData {
				return nil, nil, notDeb(name, "second data member %q", memberName)
			}
			sawData = true
			files, err = s.readData(name, memberName, m)
		default:
			return nil, nil, notDeb(name, "unexpected ar member %q", memberName)
		}
		if err != nil {
			return nil, nil, err
		}
		if err := s.skip(name, memberName, m, size); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case !sawBinary:
		return nil, nil, notDeb(name, "empty ar archive")
	case control == nil:
		return nil, nil, notDeb(name, "no control.tar member")
	case !sawData:
		return nil, nil, notDeb(name, "no data.tar member")
	}
	return control, files, nil
}

// next reads the next ar member header. It returns io.EOF at a clean end.
func (s *scanner) next(name string) (string, int64, error) {
	n, err := io.ReadFull(s.br, s.hdr[:])
	if err == io.EOF {
		return "", 0, io.EOF
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "", 0, truncated(name, "ar member header at offset %d cut short after %d bytes", s.off, n)
	}
	if err != nil {
		return "", 0, fmt.Errorf("%s: read: %w", name, err)
	}
	h := s.hdr[:]
	if h[58] != '`' || h[59] != '\n' {
		return "", 0, notDeb(name, "malformed ar member header at offset %d", s.off)
	}
	memberName := strings.TrimSuffix(strings.TrimRight(string(h[0:16]), " "), "/")
	size, err := strconv.ParseInt(strings.TrimRight(string(h[48:58]), " "), 10, 64)
	if err != nil || size < 0 || memberName == "" {
		return "", 0, notDeb(name, "malformed ar member header at offset %d", s.off)
	}
	s.off += arHeaderLen
	return memberName, size, nil
}

// skip consumes what is left of a member and its padding byte.
func (s *scanner) skip(name, memberName string, m *member, size int64) error {
	if m.truncated {
		return truncated(name, "ar member %s ends early", memberName)
	}
	left := m.n + size%2
	for left > 0 {
		chunk := min(left, 1<<30)
		k, err := s.br.Discard(int(chunk))
		left -= int64(k)
		if err == io.EOF {
			return truncated(name, "ar member %s needs %d more bytes", memberName, left)
		}
		if err != nil {
			return fmt.Errorf("%s: read: %w", name, err)
		}
	}
	s.off += size + size%2
	return nil
}

func (s *scanner) readBinaryVersion(name string, m *member) error {
	var buf [16]byte
	n, err := io.ReadFull(m, buf[:min(int64(len(buf)), m.n)])
	if err != nil {
		if m.truncated {
			return truncated(name, "ar member debian-binary ends early")
		}
		return fmt.Errorf("%s: read debian-binary: %w", name, err)
	}
	v := string(buf[:n])
	if !strings.HasPrefix(v, "2.") || !strings.Contains(v, "\n") {
		return notDeb(name, "unsupported format version %q in debian-binary", v)
	}
	return nil
}

// readControl decompresses a control.tar member and returns its control file.
func (s *scanner) readControl(name, memberName string, m *member) ([]byte, error) {
	// dpkg compresses control.tar with none, gzip, xz or zstd only.
	r, done, err := s.decompress(strings.TrimPrefix(memberName, "control.tar"), m, false)
	if errors.Is(err, errUnsupported) {
		return nil, notDeb(name, "unsupported compression of ar member %q", memberName)
	}
	if err != nil {
		return nil, s.controlError(name, memberName, m, err)
	}
	if done != nil {
		defer done()
	}
	lr := &io.LimitedReader{R: r, N: maxControlTar}
	tr := tar.NewReader(lr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, notDeb(name, "%s holds no control file", memberName)
		}
		if err != nil {
			if lr.N <= 0 {
				return nil, notDeb(name, "%s is larger than %d bytes decompressed", memberName, maxControlTar)
			}
			return nil, s.controlError(name, memberName, m, err)
		}
		if path.Clean(h.Name) != "control" {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, notDeb(name, "control in %s is not a regular file", memberName)
		}
		if h.Size > maxControlFile {
			return nil, notDeb(name, "control file in %s is %d bytes, more than the %d allowed", memberName, h.Size, maxControlFile)
		}
		var b bytes.Buffer
		b.Grow(int(h.Size))
		if _, err := b.ReadFrom(tr); err != nil {
			return nil, s.controlError(name, memberName, m, err)
		}
		return b.Bytes(), nil
	}
}

func (s *scanner) controlError(name, memberName string, m *member, err error) error {
	if m.truncated {
		return truncated(name, "ar member %s ends early", memberName)
	}
	return fmt.Errorf("%s: %w: read %s: %w", name, ErrNotDeb, memberName, err)
}

// member reads the data of one ar member from the archive stream, noting whether
// the stream ended before the member did.
type member struct {
	br        *bufio.Reader
	n         int64 // bytes of the member not read yet
	truncated bool
}

func (m *member) Read(p []byte) (int, error) {
	if m.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > m.n {
		p = p[:m.n]
	}
	n, err := m.br.Read(p)
	m.n -= int64(n)
	if err == io.EOF {
		m.truncated = true
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (m *member) ReadByte() (byte, error) {
	if m.n <= 0 {
		return 0, io.EOF
	}
	c, err := m.br.ReadByte()
	if err == io.EOF {
		m.truncated = true
		return 0, io.ErrUnexpectedEOF
	}
	if err == nil {
		m.n--
	}
	return c, err
}

// errUnsupported: an ar member compressed in a way a .deb does not use.
var errUnsupported = errors.New("unsupported compression")

// decompress returns a reader of the member m compressed as ext says ("", ".gz", ".xz",
// ".zst", and with old also ".bz2" and ".lzma", which only data.tar may use), and a
// function to call once it is read (nil when there is none).
func (s *scanner) decompress(ext string, m *member, old bool) (io.Reader, func(), error) {
	switch ext {
	case "":
		return m, nil, nil
	case ".gz":
		if s.gz == nil {
			s.gz = new(gzip.Reader)
		}
		if err := s.gz.Reset(m); err != nil {
			return nil, nil, err
		}
		return s.gz, nil, nil
	case ".xz":
		xr, err := newXZReader(m)
		return xr, nil, err
	case ".zst":
		zr, err := getZstd(m)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { putZstd(zr) }, nil
	case ".bz2":
		if old {
			return bzip2.NewReader(m), nil, nil
		}
	case ".lzma":
		if old {
			lr, err := lzma.ReaderConfig{DictCap: maxXZDict}.NewReader(m)
			return lr, nil, err
		}
	}
	return nil, nil, errUnsupported
}
