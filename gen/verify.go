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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/gen/release"
	"github.com/armor-apt/armor/gen/sign"
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
// Pool every pool file a Packages or Sources index lists (size and SHA256). It keeps going after a
// problem and reports them all.
func VerifyTree(ctx context.Context, f Fetcher, o VerifyOptions) (*VerifyReport, error) {
	r := &VerifyReport{}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	problem := func(format string, a ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, a...)) }
	pool := map[string]poolEntry{}
	for _, suite := range o.Suites {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		r.Suites++
		dist := "dists/" + suite + "/"
		inRelease, err := fetchAll(ctx, f, dist+"InRelease")
		if err != nil {
			problem("%sInRelease: %v", dist, err)
			continue
		}
		text, fpr, err := sign.VerifyClearsigned(inRelease, o.Keyrings...)
		if err != nil {
			problem("%sInRelease: signature: %v", dist, err)
			continue
		}
		if plain, err := fetchAll(ctx, f, dist+"Release"); err == nil {
			if !bytes.Equal(plain, text) {
				problem("%sRelease differs from the text signed in InRelease", dist)
			}
			if sig, err := fetchAll(ctx, f, dist+"Release.gpg"); err == nil {
				if fpr2, err := sign.VerifyDetached(plain, sig, o.Keyrings...); err != nil {
					problem("%sRelease.gpg: %v", dist, err)
				} else if fpr2 != fpr {
					problem("%sRelease.gpg is signed by %s, InRelease by %s", dist, fpr2, fpr)
				}
			}
		}
		rel, err := release.Parse(text)
		if err != nil {
			problem("%sRelease: %v", dist, err)
			continue
		}
		if vu := rel.Field("Valid-Until"); vu != "" {
			t, err := release.ParseDate(vu)
			switch {
			case err != nil:
				problem("%sRelease: Valid-Until %q does not parse", dist, vu)
			case o.Now.After(t):
				problem("%sRelease expired at %s (Valid-Until); rebuild with --resign", dist, vu)
			}
		}
		byHash := rel.AcquireByHash()
		sums := rel.Sums
		for _, p := range rel.Paths() {
			want := sums[p]
			r.Indexes++
			data, err := fetchAll(ctx, f, dist+p)
			if err != nil {
				problem("%s%s: %v", dist, p, err)
				continue
			}
			if got := digestsOf(data); !sumsMatch(data, got, want) {
				problem("%s%s: size or hashes differ from Release (size %d, want %d)", dist, p, got.Size, want.Size)
				continue
			}
			if byHash && want.SHA256 != "" {
				bh := byHashPath(dist+p, want.SHA256)
				if h, err := fetchAll(ctx, f, bh); err != nil {
					problem("%s: %v", bh, err)
				} else if !bytes.Equal(h, data) {
					problem("%s differs from %s%s", bh, dist, p)
				}
			}
			if o.Pool && strings.HasSuffix(p, "/Sources") {
				if err := collectSourcePool(data, pool); err != nil {
					problem("%s%s: %v", dist, p, err)
				}
			}
			if o.Pool && strings.HasSuffix(p, "/Packages") {
				if err := collectPool(data, pool); err != nil {
					problem("%s%s: %v", dist, p, err)
				}
			}
			if o.Pool && strings.HasSuffix(p, "/Packages.gz") && sums[strings.TrimSuffix(p, ".gz")].Size == 0 {
				if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
					if plain, err := io.ReadAll(zr); err == nil {
						collectPool(plain, pool)
					}
				}
			}
		}
	}
	names := make([]string, 0, len(pool))
	for p := range pool {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		r.PoolFiles++
		if err := checkPoolFile(ctx, f, p, pool[p]); err != nil {
			problem("%s: %v", p, err)
		}
	}
	if len(r.Problems) > 0 {
		return r, fmt.Errorf("%w: %d problem(s), first: %s", ErrVerify, len(r.Problems), r.Problems[0])
	}
	return r, nil
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

func fetchAll(ctx context.Context, f Fetcher, p string) ([]byte, error) {
	rc, err := f.Open(ctx, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("missing")
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
