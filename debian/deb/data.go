package deb

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

const (
	// maxDataFiles and maxDataNames bound the file list read from data.tar, so that a
	// crafted archive of millions of empty entries cannot exhaust memory. The largest
	// Debian packages list about 100,000 files.
	maxDataFiles = 4 << 20
	maxDataNames = 256 << 20
)

// readData decompresses a data.tar member and returns the paths of everything in it but
// directories, as Debian's Contents files list them: relative to the root, without a
// leading "./", cleaned, sorted and each once. The file contents are read through (the
// member is a stream) but not kept. Only the tar headers are checked: the member's bytes
// are covered by the package's digests, and the archive's trailing padding and the
// compressor's own checksum are not read.
func (s *scanner) readData(name, memberName string, m *member) ([]string, error) {
	r, done, err := s.decompress(strings.TrimPrefix(memberName, "data.tar"), m, true)
	if errors.Is(err, errUnsupported) {
		return nil, notDeb(name, "unsupported compression of ar member %q", memberName)
	}
	if err != nil {
		return nil, s.dataError(name, memberName, m, err)
	}
	if done != nil {
		defer done()
	}
	var files []string
	bytes := 0
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, s.dataError(name, memberName, m, err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		p, ok := contentsPath(h.Name)
		if !ok {
			continue
		}
		if bytes += len(p); len(files) == maxDataFiles || bytes > maxDataNames {
			return nil, notDeb(name, "%s lists more files than the %d (or %d bytes of names) allowed", memberName, maxDataFiles, maxDataNames)
		}
		files = append(files, p)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// contentsPath returns the path a Contents file lists for a tar entry name: cleaned,
// relative to the root. Names that are the root itself, or that hold a line break (which
// would split a Contents line), are not listed.
func contentsPath(name string) (string, bool) {
	p := strings.TrimLeft(path.Clean("/"+name), "/")
	if p == "" || strings.ContainsAny(p, "\n\r") {
		return "", false
	}
	return p, true
}

func (s *scanner) dataError(name, memberName string, m *member, err error) error {
	if m.truncated {
		return truncated(name, "ar member %s ends early", memberName)
	}
	return fmt.Errorf("%s: %w: read %s: %w", name, ErrNotDeb, memberName, err)
}
