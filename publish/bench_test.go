package publish_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// BenchmarkPushOneAdded pushes, to the S3 test server, a release that differs from the
// one already there by one new package and 8 regenerated index files, knowing the
// previous release. The store requests per push must depend on the change only, not on
// the size of the release.
func BenchmarkPushOneAdded(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) { benchmarkPushOneAdded(b, n) })
	}
}

func benchmarkPushOneAdded(b *testing.B, n int) {
	const changed = 9
	srv := s3test.Start(b)
	remote := srv.Remote("armor", "bench")
	// The release already pushed: written straight into the server's directory, which
	// is where serve s3 keeps objects.
	files := b.TempDir()
	rel := make([]publish.Upload, n)
	for i := range rel {
		rel[i] = writeUpload(b, files, storetest.RandomObject(uint64(i), 200+i%3000))
		dst := filepath.Join(srv.Dir, "armor", "bench", filepath.FromSlash(store.ObjectPath(rel[i].SHA256)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Link(rel[i].Path, dst); err != nil {
			b.Fatal(err)
		}
	}
	s, err := store.OpenRclone(context.Background(), remote)
	if err != nil {
		b.Fatal(err)
	}
	c := store.NewCounting(s)
	var requests, bytesUp int64
	round := uint64(0)
	for b.Loop() {
		b.StopTimer()
		round++
		prev := known(rel)
		next := make([]publish.Upload, len(rel))
		copy(next, rel)
		// One new .deb (a few hundred KiB) and 8 small index files changed.
		next[0] = writeUpload(b, files, storetest.RandomObject(round<<40, 300<<10))
		for j := 1; j < changed; j++ {
			next[j*(n/changed)] = writeUpload(b, files, storetest.RandomObject(round<<40|uint64(j), 2000+j*100))
		}
		c.Reset()
		b.StartTimer()

		st, err := publish.UploadMissing(context.Background(), c, next, publish.UploadOptions{Known: prev})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		counts := c.Counts()
		if st.Uploaded != changed || st.Known != n-changed {
			b.Fatalf("push: %+v; want %d uploaded, %d known", st, changed, n-changed)
		}
		if counts.Requests() > 2*changed+2 {
			b.Fatalf("push made %d store requests for %d changed objects: %+v", counts.Requests(), changed, counts)
		}
		requests += counts.Requests()
		bytesUp += counts.BytesPut
		rel = next
		b.StartTimer()
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(bytesUp)/float64(b.N), "bytes-uploaded/op")
}

// BenchmarkWriteBuildRecord writes the record of a release of 100,000 packages that adds
// one package and changes a few index files (what armor build adds to a build of that
// size): the comparison of the two releases and the digest of the 25 MB manifest.
func BenchmarkWriteBuildRecord(b *testing.B) {
	const n = 100000
	digest := func(i uint64) string {
		s := sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
		return hex.EncodeToString(s[:])
	}
	parent := &manifest.Manifest{Schema: manifest.SchemaVersion, Repository: "test", Date: "2026-01-01T00:00:00Z"}
	for i := range n {
		name := fmt.Sprintf("pkg%06d", i)
		parent.Packages = append(parent.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name, Version: "1.0-1",
			Architecture: "amd64", Path: "pool/main/p/" + name + "/" + name + "_1.0-1_amd64.deb", Size: 1000, SHA256: digest(uint64(i))})
	}
	for i := range 30 {
		parent.Files = append(parent.Files, manifest.File{Path: fmt.Sprintf("dists/stable/f%02d", i), Size: 100, SHA256: digest(1<<40 | uint64(i))})
	}
	if err := manifest.Seal(parent); err != nil {
		b.Fatal(err)
	}
	m := &manifest.Manifest{Schema: parent.Schema, Repository: parent.Repository, Parent: parent.ID, Date: parent.Date,
		Packages: append(slices.Clone(parent.Packages), manifest.Package{Suite: "stable", Component: "main", Name: "zz", Version: "1.0-1",
			Architecture: "amd64", Path: "pool/main/z/zz/zz_1.0-1_amd64.deb", Size: 1000, SHA256: digest(1 << 41)}),
		Files: slices.Clone(parent.Files)}
	for i := range 8 {
		m.Files[i].SHA256 = digest(1<<42 | uint64(i))
	}
	encoded, err := manifest.SealMarshal(m)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(int64(len(encoded)))
	for b.Loop() {
		if err := publish.WriteBuildRecord(dir, m, parent, encoded); err != nil {
			b.Fatal(err)
		}
	}
}
