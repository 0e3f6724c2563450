package gen

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/ulikunitz/xz"
)

// Fetcher reads files of a published tree by slash-separated path, from a directory or
// over HTTP. A missing file is an error wrapping fs.ErrNotExist.
type Fetcher interface {
	Open(ctx context.Context, path string) (io.ReadCloser, error)
}

// VerifyOptions configure VerifyTree.
type VerifyOptions struct {
	Suites   []string // codenames under dists/
	Keyrings [][]byte // public keys, armored or binary
	Pool     bool     // also check every pool file the Packages indexes list
	Now      time.Time
}

// VerifyReport says what VerifyTree checked and what did not match.
type VerifyReport struct {
	Suites    int      `json:"suites"`
	Indexes   int      `json:"indexes"`
	PoolFiles int      `json:"pool_files"`
	Problems  []string `json:"problems"`
}

// ErrVerify is wrapped by VerifyTree's error when the tree does not verify.
var ErrVerify = errors.New("tree does not verify")

// VerifyTree checks a tree the way apt does: each suite's InRelease signature (and
// Release.gpg when present), that Release is InRelease's signed text, every index
// Release lists (size, MD5, SHA256, and SHA1 where listed) and its by-hash copy, Valid-Until, and with
// Pool every pool file a Packages or Sources index lists (size and SHA256). An uncompressed
// index the tree does not have, as Debian's archive and armor's do not, is checked through
// its .gz or .xz, which must decompress to what Release lists for it. It keeps going after
// a problem and reports them all.
func VerifyTree(ctx context.Context, f Fetcher, o VerifyOptions) (*VerifyReport, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	v := &verifier{f: f, o: o, r: &VerifyReport{}, pool: map[string]poolEntry{}}
	for _, suite := range o.Suites {
		if err := ctx.Err(); err != nil {
			return v.r, err
		}
		v.r.Suites++
		v.suite(ctx, "dists/"+suite+"/")
	}
	for _, p := range slices.Sorted(maps.Keys(v.pool)) {
		if err := ctx.Err(); err != nil {
			return v.r, err
		}
		v.r.PoolFiles++
		if err := checkPoolFile(ctx, f, p, v.pool[p]); err != nil {
			v.problem("%s: %v", p, err)
		}
	}
	if len(v.r.Problems) > 0 {
		return v.r, fmt.Errorf("%w: %d problem(s), first: %s", ErrVerify, len(v.r.Problems), v.r.Problems[0])
	}
	return v.r, nil
}

// verifier is one run of VerifyTree.
type verifier struct {
	f    Fetcher
	o    VerifyOptions
	r    *VerifyReport
	pool map[string]poolEntry // the pool files the indexes list, to check (with o.Pool)
}

func (v *verifier) problem(format string, a ...any) {
	v.r.Problems = append(v.r.Problems, fmt.Sprintf(format, a...))
}

// suite checks the suite under dist: its Release files, then its indexes, and notes the
// pool files they list.
func (v *verifier) suite(ctx context.Context, dist string) {
	rel, ok := v.release(ctx, dist)
	if !ok {
		return
	}
	indexes := v.indexes(ctx, dist, rel)
	if !v.o.Pool {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(indexes)) {
		var err error
		switch path.Base(p) {
		case "Sources":
			err = collectSourcePool(indexes[p], v.pool)
		case "Packages":
			err = collectPool(indexes[p], v.pool)
		}
		if err != nil {
			v.problem("%s%s: %v", dist, p, err)
		}
	}
	// A Release listing no uncompressed Packages: its .gz, then.
	for _, p := range slices.Sorted(maps.Keys(indexes)) {
		if plain := strings.TrimSuffix(p, ".gz"); path.Base(plain) == "Packages" && plain != p && indexes[plain] == nil {
			if data, err := gunzipAll(indexes[p]); err == nil {
				collectPool(data, v.pool)
			}
		}
	}
}

// release checks the suite's InRelease signature, that Release is its signed text and
// Release.gpg signs it by the same key, and Valid-Until; it returns the Release, unless
// it cannot be read.
func (v *verifier) release(ctx context.Context, dist string) (*release.File, bool) {
	inRelease, err := fetchAll(ctx, v.f, dist+"InRelease")
	if err != nil {
		v.problem("%sInRelease: %v", dist, err)
		return nil, false
	}
	text, fpr, err := sign.VerifyClearsigned(inRelease, v.o.Keyrings...)
	if err != nil {
		v.problem("%sInRelease: signature: %v", dist, err)
		return nil, false
	}
	if plain, err := fetchAll(ctx, v.f, dist+"Release"); err == nil {
		if !bytes.Equal(plain, text) {
			v.problem("%sRelease differs from the text signed in InRelease", dist)
		}
		if sig, err := fetchAll(ctx, v.f, dist+"Release.gpg"); err == nil {
			if fpr2, err := sign.VerifyDetached(plain, sig, v.o.Keyrings...); err != nil {
				v.problem("%sRelease.gpg: %v", dist, err)
			} else if fpr2 != fpr {
				v.problem("%sRelease.gpg is signed by %s, InRelease by %s", dist, fpr2, fpr)
			}
		}
	}
	rel, err := release.Parse(text)
	if err != nil {
		v.problem("%sRelease: %v", dist, err)
		return nil, false
	}
	if vu := rel.Field("Valid-Until"); vu != "" {
		t, err := release.ParseDate(vu)
		switch {
		case err != nil:
			v.problem("%sRelease: Valid-Until %q does not parse", dist, vu)
		case v.o.Now.After(t):
			v.problem("%sRelease expired at %s (Valid-Until); rebuild with --resign", dist, vu)
		}
	}
	return rel, true
}

// indexes checks every index rel lists, and its by-hash copy, and returns those it read
// (by path relative to dist), an uncompressed one published only compressed included.
func (v *verifier) indexes(ctx context.Context, dist string, rel *release.File) map[string][]byte {
	sums := rel.Sums
	indexes := map[string][]byte{}
	var unpublished []string // uncompressed indexes published only compressed
	for _, p := range rel.Paths() {
		want := sums[p]
		v.r.Indexes++
		data, err := fetchAll(ctx, v.f, dist+p)
		if errors.Is(err, fs.ErrNotExist) && compressedListed(sums, p) {
			// As in Debian's archive: apt fetches a compressed form.
			unpublished = append(unpublished, p)
			continue
		}
		if err != nil {
			v.problem("%s%s: %v", dist, p, err)
			continue
		}
		if got := digestsOf(data); !sumsMatch(data, got, want) {
			v.problem("%s%s: size or hashes differ from Release (size %d, want %d)", dist, p, got.Size, want.Size)
			continue
		}
		if rel.AcquireByHash() && want.SHA256 != "" {
			bh := byHashPath(dist+p, want.SHA256)
			if h, err := fetchAll(ctx, v.f, bh); err != nil {
				v.problem("%s: %v", bh, err)
			} else if !bytes.Equal(h, data) {
				v.problem("%s differs from %s%s", bh, dist, p)
			}
		}
		indexes[p] = data
	}
	// An index published compressed only must decompress to what Release lists for
	// its uncompressed form: apt checks the data it decompresses against that.
	for _, p := range unpublished {
		data, from, err := decompressIndex(indexes, p)
		if err != nil {
			v.problem("%s%s: not published, and %v", dist, p, err)
			continue
		}
		if got := digestsOf(data); !sumsMatch(data, got, sums[p]) {
			v.problem("%s%s decompresses to other data than Release lists for %s%s (size %d, want %d)", dist, from, dist, p, got.Size, sums[p].Size)
			continue
		}
		indexes[p] = data
	}
	return indexes
}

// compressedListed reports whether sums lists a compressed form of the index p.
func compressedListed(sums map[string]release.Digests, p string) bool {
	_, gz := sums[p+".gz"]
	_, xz := sums[p+".xz"]
	return gz || xz
}

// decompressIndex returns the index p decompressed from its .gz or, failing that, its
// .xz among the fetched indexes, and the path of the one it decompressed.
func decompressIndex(indexes map[string][]byte, p string) ([]byte, string, error) {
	var errs []error
	for _, ext := range []string{".gz", ".xz"} {
		comp, ok := indexes[p+ext]
		if !ok {
			continue
		}
		var data []byte
		var err error
		if ext == ".gz" {
			data, err = gunzipAll(comp)
		} else {
			data, err = unxzAll(comp)
		}
		if err == nil {
			return data, p + ext, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p+ext, err))
	}
	if len(errs) == 0 {
		return nil, "", errors.New("no compressed form of it could be fetched")
	}
	return nil, "", errors.Join(errs...)
}

func gunzipAll(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func unxzAll(data []byte) ([]byte, error) {
	zr, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// sumsMatch reports whether data, whose digests are got, has the size and every sum want
// lists. A Release armor wrote before it dropped SHA-1 lists it too.
func sumsMatch(data []byte, got, want release.Digests) bool {
	if want.SHA1 != "" {
		s := sha1.Sum(data)
		got.SHA1 = hex.EncodeToString(s[:])
	}
	return got.Size == want.Size &&
		(want.MD5 == "" || want.MD5 == got.MD5) &&
		(want.SHA1 == "" || want.SHA1 == got.SHA1) &&
		(want.SHA256 == "" || want.SHA256 == got.SHA256) &&
		(want.MD5 != "" || want.SHA1 != "" || want.SHA256 != "")
}

type poolEntry struct {
	size              int64
	md5, sha1, sha256 string
}

// collectPool adds the Filename, Size and hashes of every stanza of a Packages file.
func collectPool(packages []byte, pool map[string]poolEntry) error {
	for _, st := range bytes.Split(packages, []byte("\n\n")) {
		var name string
		var e poolEntry
		for _, line := range strings.Split(string(st), "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			switch k {
			case "Filename":
				name = v
			case "Size":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("bad Size %q", v)
				}
				e.size = n
			case "MD5sum":
				e.md5 = v
			case "SHA1":
				e.sha1 = v
			case "SHA256":
				e.sha256 = v
			}
		}
		if name != "" {
			pool[name] = e
		}
	}
	return nil
}

// collectSourcePool adds every file a Sources index lists (Directory, and the size and
// SHA256 of each Checksums-Sha256 line).
func collectSourcePool(sources []byte, pool map[string]poolEntry) error {
	for _, st := range bytes.Split(sources, []byte("\n\n")) {
		st = append(bytes.TrimRight(st, "\n"), '\n')
		dir := string(stanzaField(st, "\nDirectory: "))
		i := bytes.Index(st, []byte("\nChecksums-Sha256:\n"))
		if len(bytes.TrimSpace(st)) == 0 {
			continue
		}
		if dir == "" || i < 0 {
			return fmt.Errorf("a stanza lacks Directory or Checksums-Sha256")
		}
		for _, line := range strings.Split(string(st[i+len("\nChecksums-Sha256:\n"):]), "\n") {
			if !strings.HasPrefix(line, " ") {
				break
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				return fmt.Errorf("bad Checksums-Sha256 line %q", line)
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return fmt.Errorf("bad size in Checksums-Sha256 line %q", line)
			}
			pool[dir+"/"+f[2]] = poolEntry{size: n, sha256: f[0]}
		}
	}
	return nil
}

func checkPoolFile(ctx context.Context, f Fetcher, p string, want poolEntry) error {
	rc, err := f.Open(ctx, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	hs := []hash.Hash{md5.New(), sha1.New(), sha256.New()}
	n, err := io.Copy(io.MultiWriter(hs[0], hs[1], hs[2]), rc)
	if err != nil {
		return err
	}
	got := []string{hex.EncodeToString(hs[0].Sum(nil)), hex.EncodeToString(hs[1].Sum(nil)), hex.EncodeToString(hs[2].Sum(nil))}
	switch {
	case n != want.size:
		return fmt.Errorf("size %d, Packages says %d", n, want.size)
	case want.sha256 != got[2]:
		return fmt.Errorf("SHA256 %s, Packages says %s", got[2], want.sha256)
	case want.md5 != "" && want.md5 != got[0], want.sha1 != "" && want.sha1 != got[1]:
		return fmt.Errorf("MD5 or SHA1 differ from Packages")
	}
	return nil
}

// errMissing is fetchAll's error for a file the tree does not have.
var errMissing error = missingError{}

type missingError struct{}

func (missingError) Error() string        { return "missing" }
func (missingError) Is(target error) bool { return target == fs.ErrNotExist }

func fetchAll(ctx context.Context, f Fetcher, p string) ([]byte, error) {
	rc, err := f.Open(ctx, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errMissing
		}
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// digestsOf computes the sums Release lists, in parallel: an index of 100,000
// packages is tens of megabytes.
func digestsOf(data []byte) release.Digests {
	hs := []hash.Hash{md5.New(), sha256.New()}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() { h.Write(data) })
	}
	wg.Wait()
	return release.Digests{
		Size:   int64(len(data)),
		MD5:    hex.EncodeToString(hs[0].Sum(nil)),
		SHA256: hex.EncodeToString(hs[1].Sum(nil)),
	}
}
