package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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
	// Date is the build time (SOURCE_DATE_EPOCH when set), RFC 3339 in UTC.
	Date     string    `toml:"date"`
	Packages []Package `toml:"package,omitempty"`
	Files    []File    `toml:"file,omitempty"`
}

// Package is one binary package in one suite and component. Architecture is the
// package's own (so "all" appears once, though it is listed in every binary-* index).
type Package struct {
	Suite        string `toml:"suite"`
	Component    string `toml:"component"`
	Name         string `toml:"name"`
	Version      string `toml:"version"`
	Architecture string `toml:"architecture"`
	Path         string `toml:"path"`
	Size         int64  `toml:"size"`
	SHA256       string `toml:"sha256"`
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
	add := func(o Object) {
		if !seen[o.SHA256] {
			seen[o.SHA256] = true
			out = append(out, o)
		}
	}
	for _, p := range m.Packages {
		add(Object{p.SHA256, p.Size})
	}
	for _, f := range m.Files {
		add(Object{f.SHA256, f.Size})
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.SHA256, b.SHA256) })
	return out
}

// Sort puts packages and files in canonical order: packages by suite, component, name,
// version string, architecture and path; files by path.
func (m *Manifest) Sort() {
	slices.SortFunc(m.Packages, comparePackages)
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
}

func comparePackages(a, b Package) int {
	return cmp.Or(
		strings.Compare(a.Suite, b.Suite),
		strings.Compare(a.Component, b.Component),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Version, b.Version),
		strings.Compare(a.Architecture, b.Architecture),
		strings.Compare(a.Path, b.Path),
	)
}

// ValidPath reports whether p is a clean, relative, slash-separated tree path: no
// empty, "." or ".." segment, no backslash or NUL.
func ValidPath(p string) bool {
	if p == "" {
		return false
	}
	segStart := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			if p[i] == '\\' || p[i] == 0 {
				return false
			}
			continue
		}
		seg := p[segStart:i]
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		segStart = i + 1
	}
	return true
}

// packageLabel and fileLabel name an entry in errors; they are formatted only when an
// error is returned, since Validate runs over every entry of large manifests.
type packageLabel struct {
	i int
	p *Package
}

func (l packageLabel) String() string {
	return fmt.Sprintf("package %d (%s %s %s in %s/%s)", l.i+1, l.p.Name, l.p.Version, l.p.Architecture, l.p.Suite, l.p.Component)
}

type fileLabel struct {
	i    int
	path string
}

func (l fileLabel) String() string { return fmt.Sprintf("file %d (%s)", l.i+1, l.path) }

// ValidDigest reports whether s is a lowercase hex SHA-256.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks the manifest's internal consistency: schema, digests, sizes, paths,
// canonical order, no duplicate identity, and no path served as two different objects.
// It does not check the ID; see VerifyID.
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
	paths := make(map[string]Object, len(m.Files)+len(m.Packages))
	claim := func(what fmt.Stringer, p string, o Object) error {
		if !ValidPath(p) {
			return fmt.Errorf("%s: path %q is not a clean relative path", what, p)
		}
		if !ValidDigest(o.SHA256) {
			return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", what, o.SHA256)
		}
		if o.Size < 0 {
			return fmt.Errorf("%s: negative size %d", what, o.Size)
		}
		if prev, ok := paths[p]; ok && prev != o {
			return fmt.Errorf("%s: path %s is listed as two different objects", what, p)
		}
		paths[p] = o
		return nil
	}
	for i, p := range m.Packages {
		what := packageLabel{i, &p}
		if p.Suite == "" || p.Component == "" || p.Name == "" || p.Version == "" || p.Architecture == "" {
			return fmt.Errorf("%s: suite, component, name, version and architecture are required", what)
		}
		// Packages are in canonical order (checked below), so a package listed twice
		// stands next to itself.
		if i > 0 && m.Packages[i-1].Key() == p.Key() {
			return fmt.Errorf("%s: listed twice", what)
		}
		if !strings.HasPrefix(p.Path, "pool/") {
			return fmt.Errorf("%s: path %q is not under pool/", what, p.Path)
		}
		if err := claim(what, p.Path, Object{p.SHA256, p.Size}); err != nil {
			return err
		}
		if i > 0 && comparePackages(m.Packages[i-1], p) > 0 {
			return fmt.Errorf("%s: packages are not in canonical order", what)
		}
	}
	for i, f := range m.Files {
		what := fileLabel{i, f.Path}
		if err := claim(what, f.Path, Object{f.SHA256, f.Size}); err != nil {
			return err
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("%s: files are not sorted by path, or listed twice", what)
		}
	}
	return nil
}
