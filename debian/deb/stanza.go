package deb

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/armor-apt/armor/debian/pool"
)

// overridden lists the control fields (lowercase) that a Packages stanza does not
// copy from the control file. The first five are written afresh from the file's
// size and digests. apt-ftparchive also drops Status and Optional, and it writes
// SHA512, which armor leaves out as Debian's own archive does (apt needs no more
// than SHA256), so a stale SHA512 in a control file must not survive either.
var overridden = map[string]bool{
	"filename": true, "size": true, "md5sum": true, "sha1": true, "sha256": true,
	"sha512": true, "status": true, "optional": true,
}

// Stanza returns the package's Packages stanza: the control fields in their
// original order, then Filename (as given), Size, MD5sum, SHA1 and SHA256. It ends
// with a single "\n"; the index writer adds the blank lines between stanzas.
func (p *Package) Stanza(filename string) []byte {
	n := len(filename) + 256
	for _, f := range p.Fields {
		n += len(f.Name) + len(f.Value) + 3
	}
	var b bytes.Buffer
	b.Grow(n)
	for _, f := range p.Fields {
		if !overridden[strings.ToLower(f.Name)] {
			writeField(&b, f.Name, f.Value)
		}
	}
	writeField(&b, "Filename", filename)
	writeField(&b, "Size", strconv.FormatInt(p.Size, 10))
	writeField(&b, "MD5sum", p.MD5)
	writeField(&b, "SHA1", p.SHA1)
	writeField(&b, "SHA256", p.SHA256)
	return b.Bytes()
}

// CanonicalFilename is name_version_arch.deb with the version's epoch left out,
// as dak and reprepro name pool files: "hello_2.10-3_amd64.deb" for 1:2.10-3.
func (p *Package) CanonicalFilename() string {
	return pool.Filename(p.Name, p.Version, p.Architecture)
}
