package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// A build leaves in the repository's cache a record of what its release adds to its
// parent, so that a push of it on the same runner needs neither to parse the manifest
// (25 MB at 100,000 packages) nor to fetch and parse the parent's to learn which objects
// the store holds already: the release's objects are the parent's, present in the store
// if controld recorded the parent, and the few the record lists.
//
// The record is a cache: written without fsync, checked on read (its own digest, strict
// decoding, and the digest of the manifest it describes), and ignored when anything is
// off, which costs only time.

// builtFile is the build record's name in the cache directory.
const builtFile = "built"

// builtHeader starts the record, followed by the hex SHA-256 of the rest and a newline.
const builtHeader = "armor build record 1 "

// buildRecord is what a build knows of its release that a push would otherwise learn
// from the two manifests.
type buildRecord struct {
	Manifest   string `json:"manifest"` // hex SHA-256 of the manifest file's bytes
	Repository string `json:"repository"`
	Release    string `json:"release"`
	Parent     string `json:"parent"`
	Objects    int    `json:"objects"` // the release's distinct objects
	// New are the release's objects its parent lacks, each once, with the first of its
	// paths in path order.
	New []builtObject `json:"new"`
}

// builtObject is an object a release adds to its parent, and a path serving it.
type builtObject struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Path   string `json:"path"`
}

// WriteBuildRecord records in cacheDir what release m, whose manifest file holds
// encoded, adds to parent, the release it was built on, for the next push (see Push).
// A release that names no parent, or another one than parent (a build on a release
// built here and never recorded), gets no record, and an earlier record is removed.
// The record is written atomically but without fsync: a lost one costs only time.
func WriteBuildRecord(cacheDir string, m, parent *manifest.Manifest, encoded []byte) error {
	path := filepath.Join(cacheDir, builtFile)
	if parent == nil || m.Parent == "" || m.Parent != parent.ID {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the build record: %w", err)
		}
		return nil
	}
	// At 100,000 packages hashing the manifest and comparing the two releases are each
	// a measurable part of a push: they run side by side.
	digest := make(chan string, 1)
	go func() {
		sum := sha256.Sum256(encoded)
		digest <- hex.EncodeToString(sum[:])
	}()
	r := &buildRecord{Repository: m.Repository, Release: m.ID, Parent: m.Parent}
	r.Objects, r.New = addedObjects(m, parent)
	r.Manifest = <-digest
	data, err := encodeBuildRecord(r)
	if err != nil {
		return err
	}
	return atomicfile.WriteFileUnsynced(path, data, 0o644)
}

// addedObjects counts m's distinct objects and lists those parent lacks, each with the
// first of its paths in path order, sorted by digest. Both manifests may hold 100,000
// packages; only the objects of parent go into a map.
func addedObjects(m, parent *manifest.Manifest) (objects int, added []builtObject) {
	// counted says whether an object of parent was counted as one of m's.
	counted := make(map[string]bool, len(parent.Packages)+len(parent.Files))
	parent.EachObject(func(o manifest.Object) { counted[o.SHA256] = false })
	var fresh []builtObject
	visit := func(path, sum string, size int64) {
		c, ok := counted[sum]
		if !ok {
			fresh = append(fresh, builtObject{sum, size, path})
			return
		}
		if !c {
			counted[sum] = true
			objects++
		}
	}
	for i := range m.Packages {
		p := &m.Packages[i]
		visit(p.Path, p.SHA256, p.Size)
		for _, f := range p.Files {
			visit(f.Path, f.SHA256, f.Size)
		}
	}
	for _, f := range m.Files {
		visit(f.Path, f.SHA256, f.Size)
	}
	slices.SortFunc(fresh, func(a, b builtObject) int { return strings.Compare(a.Path, b.Path) })
	seen := make(map[string]bool, len(fresh))
	for _, o := range fresh {
		if !seen[o.SHA256] {
			seen[o.SHA256] = true
			added = append(added, o)
		}
	}
	slices.SortFunc(added, func(a, b builtObject) int { return strings.Compare(a.SHA256, b.SHA256) })
	return objects + len(added), added
}

// encodeBuildRecord returns the bytes of the build record file holding r.
func encodeBuildRecord(r *buildRecord) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode the build record: %w", err)
	}
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(builtHeader)+64+1+len(body))
	out = append(out, builtHeader...)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, '\n')
	return append(out, body...), nil
}

// readBuildRecord returns the build record in cacheDir if it describes the manifest
// whose digest is manifestSum; nil if there is none, it is damaged, or it describes
// another manifest.
func readBuildRecord(cacheDir, manifestSum string) *buildRecord {
	path := filepath.Join(cacheDir, builtFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	r, err := parseBuildRecord(data, path)
	if err != nil || r.Manifest != manifestSum {
		return nil
	}
	return r
}

// parseBuildRecord decodes and checks a build record file; name labels errors.
func parseBuildRecord(data []byte, name string) (*buildRecord, error) {
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(head, []byte(builtHeader)) {
		return nil, fmt.Errorf("build record %s: not a build record (want a first line %q and a digest)", name, builtHeader)
	}
	sum := sha256.Sum256(body)
	if string(head[len(builtHeader):]) != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("build record %s: its content does not match its digest: it is damaged", name)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r buildRecord
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("build record %s: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("build record %s: data after the record", name)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("build record %s: %w", name, err)
	}
	return &r, nil
}

// check validates a decoded record's fields.
func (r *buildRecord) check() error {
	for _, f := range []struct{ name, v string }{{"manifest", r.Manifest}, {"release", r.Release}, {"parent", r.Parent}} {
		if !manifest.ValidDigest(f.v) {
			return fmt.Errorf("%s %q is not a sha256", f.name, f.v)
		}
	}
	if r.Repository == "" {
		return errors.New("repository is empty")
	}
	if r.Objects < len(r.New) {
		return fmt.Errorf("objects %d is fewer than the %d new ones", r.Objects, len(r.New))
	}
	seen := make(map[string]bool, len(r.New))
	for i, o := range r.New {
		switch {
		case !manifest.ValidDigest(o.SHA256):
			return fmt.Errorf("new object %d: sha256 %q is not a sha256", i+1, o.SHA256)
		case o.Size < 0:
			return fmt.Errorf("new object %d (%s): negative size %d", i+1, o.SHA256, o.Size)
		case !manifest.ValidPath(o.Path):
			return fmt.Errorf("new object %d (%s): path %q is not a clean relative path", i+1, o.SHA256, o.Path)
		case seen[o.SHA256]:
			return fmt.Errorf("new object %d: sha256 %s is listed twice", i+1, o.SHA256)
		}
		seen[o.SHA256] = true
	}
	return nil
}
