package publish_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/s3test"
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
