package publish_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// writeRelease writes n objects of varied sizes as files under dir and returns them as
// uploads. seed makes the contents distinct between calls.
func writeRelease(t testing.TB, dir string, seed uint64, n int) []publish.Upload {
	t.Helper()
	ups := make([]publish.Upload, n)
	for i := range ups {
		o := storetest.RandomObject(seed<<32|uint64(i), 100+(i*7919)%5000)
		ups[i] = writeUpload(t, dir, o)
	}
	return ups
}

func writeUpload(t testing.TB, dir string, o storetest.Object) publish.Upload {
	t.Helper()
	path := filepath.Join(dir, o.Sum[:16]+".deb")
	if err := os.WriteFile(path, o.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	return publish.Upload{SHA256: o.Sum, Size: int64(len(o.Data)), Path: path}
}

func known(ups []publish.Upload) map[string]bool {
	m := make(map[string]bool, len(ups))
	for _, u := range ups {
		m[u.SHA256] = true
	}
	return m
}

func assertPresent(t testing.TB, s store.Store, ups []publish.Upload) {
	t.Helper()
	for _, u := range ups {
		data, err := os.ReadFile(u.Path)
		if err != nil {
			t.Fatal(err)
		}
		storetest.AssertContent(t, s, storetest.NewObject(data))
	}
}

// openLocal opens a store in a local directory.
func openLocal(t *testing.T, dir string) *store.Rclone {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), dir)
	if err != nil {
		t.Fatalf("OpenRclone(%s) = %v", dir, err)
	}
	return s
}

// openS3 opens a store on a fresh prefix of srv's bucket "armor".
func openS3(t testing.TB, srv *s3test.Server, prefix string) *store.Rclone {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), srv.Remote("armor", prefix))
	if err != nil {
		t.Fatalf("OpenRclone(S3 %s) = %v", srv.Endpoint, err)
	}
	return s
}

// pushStores are the stores every UploadMissing test runs against.
func pushStores(t *testing.T) map[string]func(t *testing.T) store.Store {
	srv := s3test.Start(t)
	var n atomic.Int64
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store { return store.NewMemory() },
		"local":  func(t *testing.T) store.Store { return openLocal(t, t.TempDir()) },
		"s3": func(t *testing.T) store.Store {
			return openS3(t, srv, fmt.Sprintf("push%d", n.Add(1)))
		},
	}
}

func TestUploadMissing(t *testing.T) {
	t.Parallel()
	for name, newStore := range pushStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			rel := writeRelease(t, dir, 1, 40)
			s := store.NewCounting(newStore(t))

			// The first push uploads everything, checking each object once.
			st, err := publish.UploadMissing(ctx, s, rel, publish.UploadOptions{})
			if err != nil {
				t.Fatalf("first push: %v", err)
			}
			assertStats(t, "first push", st, publish.UploadStats{Objects: 40, Uploaded: 40, BytesUploaded: totalSize(rel)})
			assertCounts(t, "first push", s.Counts(), store.Counts{Has: 40, Put: 40, BytesPut: totalSize(rel)})
			assertPresent(t, s, rel)

			// The second finds everything present and uploads nothing.
			s.Reset()
			st, err = publish.UploadMissing(ctx, s, rel, publish.UploadOptions{Concurrency: 3})
			if err != nil {
				t.Fatalf("second push: %v", err)
			}
			assertStats(t, "second push", st, publish.UploadStats{Objects: 40, Present: 40, BytesPresent: totalSize(rel)})
			assertCounts(t, "second push", s.Counts(), store.Counts{Has: 40})

			// Knowing the previous release, it does not even ask.
			s.Reset()
			st, err = publish.UploadMissing(ctx, s, rel, publish.UploadOptions{Known: known(rel)})
			if err != nil {
				t.Fatalf("push with everything known: %v", err)
			}
			assertStats(t, "push with everything known", st, publish.UploadStats{Objects: 40, Known: 40})
			assertCounts(t, "push with everything known", s.Counts(), store.Counts{})

			// One new object (listed twice) costs one check and one upload.
			added := writeUpload(t, dir, storetest.NewObject([]byte("hello_2.0_amd64.deb")))
			next := append(append([]publish.Upload{added}, rel...), added)
			s.Reset()
			st, err = publish.UploadMissing(ctx, s, next, publish.UploadOptions{Known: known(rel)})
			if err != nil {
				t.Fatalf("push of one new object: %v", err)
			}
			assertStats(t, "push of one new object", st, publish.UploadStats{Objects: 41, Known: 40, Uploaded: 1, BytesUploaded: added.Size})
			assertCounts(t, "push of one new object", s.Counts(), store.Counts{Has: 1, Put: 1, BytesPut: added.Size})
			assertPresent(t, s, []publish.Upload{added})
		})
	}
}

func totalSize(ups []publish.Upload) int64 {
	var n int64
	for _, u := range ups {
		n += u.Size
	}
	return n
}

func assertStats(t *testing.T, what string, got, want publish.UploadStats) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: stats\n got %+v\nwant %+v", what, got, want)
	}
}

func assertCounts(t *testing.T, what string, got, want store.Counts) {
	t.Helper()
	if got != want {
		t.Errorf("%s: store calls\n got %+v\nwant %+v", what, got, want)
	}
}

func TestUploadMissingDryRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	rel := writeRelease(t, dir, 2, 10)
	mem := store.NewMemory()
	if _, err := publish.UploadMissing(ctx, mem, rel[:4], publish.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	s := store.NewCounting(mem)
	st, err := publish.UploadMissing(ctx, s, rel, publish.UploadOptions{DryRun: true, Known: known(rel[:1])})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.WouldUpload) != 6 || st.Present != 3 || st.Known != 1 || st.Uploaded != 0 {
		t.Errorf("dry run stats = %+v; want 6 to upload, 3 present, 1 known, 0 uploaded", st)
	}
	want := known(rel[4:])
	for i, u := range st.WouldUpload {
		if !want[u.SHA256] {
			t.Errorf("dry run would upload %s, which is present", u.Path)
		}
		if i > 0 && st.WouldUpload[i-1].SHA256 >= u.SHA256 {
			t.Errorf("WouldUpload is not sorted by digest")
		}
	}
	if c := s.Counts(); c.Put != 0 || mem.Len() != 4 {
		t.Errorf("dry run stored something: %+v, %d objects", c, mem.Len())
	}
}

func TestUploadMissingTamperedFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(data []byte) []byte
	}{
		{"same size", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"appended", func(b []byte) []byte { return append(b, '\n') }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
	}
	for name, newStore := range pushStores(t) {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				rel := writeRelease(t, dir, 3, 5)
				bad := rel[2]
				data, err := os.ReadFile(bad.Path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(bad.Path, tc.tamper(data), 0o644); err != nil {
					t.Fatal(err)
				}
				s := newStore(t)
				_, err = publish.UploadMissing(context.Background(), s, rel, publish.UploadOptions{Concurrency: 1})
				if !errors.Is(err, store.ErrDigestMismatch) {
					t.Fatalf("push of a tampered file = %v; want ErrDigestMismatch", err)
				}
				for _, w := range []string{bad.Path, "changed since the build"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				storetest.AssertAbsent(t, s, bad.SHA256)
			})
		}
	}
}

// cancellingStore cancels a context after its n-th created object.
type cancellingStore struct {
	store.Store
	n      atomic.Int64
	after  int64
	cancel context.CancelFunc
}

func (c *cancellingStore) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	created, err := c.Store.Put(ctx, sum, size, r)
	if created && c.n.Add(1) == c.after {
		c.cancel()
	}
	return created, err
}

func TestUploadMissingInterruptedThenResumed(t *testing.T) {
	t.Parallel()
	for name, newStore := range pushStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rel := writeRelease(t, t.TempDir(), 4, 60)
			s := newStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs := &cancellingStore{Store: s, after: 10, cancel: cancel}
			first, err := publish.UploadMissing(ctx, cs, rel, publish.UploadOptions{Concurrency: 4})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted push = %v; want context.Canceled", err)
			}
			if first.Uploaded < 10 || first.Uploaded >= 60 {
				t.Fatalf("interrupted push uploaded %d of 60; want at least 10 and not all", first.Uploaded)
			}
			counting := store.NewCounting(s)
			second, err := publish.UploadMissing(context.Background(), counting, rel, publish.UploadOptions{})
			if err != nil {
				t.Fatalf("resumed push: %v", err)
			}
			// Whatever arrived before the interruption is not uploaded again. A request the
			// interruption cut off on the client may still complete in the S3 server while
			// the second push runs: that push's Put of it then finds it there, and counts it
			// as present.
			if second.Uploaded+second.Present != 60 || second.Uploaded > int(counting.Counts().Put) ||
				second.Uploaded > 60-first.Uploaded {
				t.Errorf("resumed push: %+v after %d uploaded; want the rest only", second, first.Uploaded)
			}
			assertPresent(t, s, rel)
		})
	}
}

func TestUploadMissingProgress(t *testing.T) {
	t.Parallel()
	rel := writeRelease(t, t.TempDir(), 5, 20)
	var mu sync.Mutex
	var last publish.UploadProgress
	calls := 0
	_, err := publish.UploadMissing(context.Background(), store.NewMemory(), rel, publish.UploadOptions{
		Known: known(rel[:5]),
		Progress: func(p publish.UploadProgress) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if p.ObjectsDone < last.ObjectsDone || p.ObjectsDone > p.ObjectsTotal || p.BytesDone > p.BytesTotal {
				t.Errorf("progress went wrong: %+v after %+v", p, last)
			}
			last = p
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := publish.UploadProgress{ObjectsDone: 15, ObjectsTotal: 15, BytesDone: totalSize(rel[5:]), BytesTotal: totalSize(rel[5:])}
	if last != want || calls < 15 {
		t.Errorf("last progress = %+v after %d calls; want %+v", last, calls, want)
	}
}

func TestUploadMissingInvalidInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := writeUpload(t, dir, storetest.NewObject([]byte("a")))
	tests := []struct {
		name string
		ups  []publish.Upload
		want string
	}{
		{"invalid digest", []publish.Upload{{SHA256: "abc", Size: 1, Path: a.Path}}, "invalid sha256"},
		{"conflicting sizes", []publish.Upload{a, {SHA256: a.SHA256, Size: 2, Path: "other.deb"}}, "other.deb"},
		{"missing file", []publish.Upload{{SHA256: a.SHA256, Size: 1, Path: filepath.Join(dir, "gone.deb")}}, "gone.deb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := publish.UploadMissing(context.Background(), store.NewMemory(), tc.ups, publish.UploadOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Push = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestUploadMissingS3WrongCredentials(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	srv.Remote("armor", "")
	remote := srv.RemoteWith("armor-test-key", "wrong-SECRET", "armor", "creds")
	s, err := store.OpenRclone(context.Background(), remote)
	if err != nil {
		t.Fatalf("OpenRclone = %v", err)
	}
	rel := writeRelease(t, t.TempDir(), 6, 3)
	_, err = publish.UploadMissing(context.Background(), s, rel, publish.UploadOptions{})
	if err == nil {
		t.Fatal("push with wrong credentials succeeded")
	}
	for _, w := range []string{s.String(), srv.Endpoint, "credentials"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	t.Logf("push with wrong credentials: %v", err)
	if strings.Contains(err.Error(), "wrong-SECRET") {
		t.Errorf("error %q shows the secret", err)
	}
}

// silentEndpoint accepts connections and never answers.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

func TestUploadMissingSilentEndpoint(t *testing.T) {
	t.Parallel()
	endpoint := silentEndpoint(t)
	s, err := store.OpenRclone(context.Background(), s3test.EndpointRemote(endpoint, "k", "SECRET", "armor", "silent"))
	if err != nil {
		t.Fatalf("OpenRclone = %v; opening should not contact the endpoint", err)
	}
	rel := writeRelease(t, t.TempDir(), 7, 3)
	// The caller's deadline is far beyond the store's own: the error must come from the
	// store's bound, not from this context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*store.RcloneRequestTimeout)
	defer cancel()
	_, err = publish.UploadMissing(ctx, s, rel, publish.UploadOptions{})
	if err == nil {
		t.Fatal("push to a silent endpoint succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("push to a silent endpoint was only stopped by the caller's deadline: %v", err)
	}
	t.Logf("push to a silent endpoint: %v", err)
	for _, w := range []string{s.String(), "no answer within"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

var errFlaky = errors.New("flaky store: try again")

// flakyStore fails its first failures Puts, each after reading half the object, as a
// dropped connection would.
type flakyStore struct {
	store.Store
	failures int64
	calls    atomic.Int64
}

func (f *flakyStore) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	if f.calls.Add(1) <= f.failures {
		_, _ = io.CopyN(io.Discard, r, size/2)
		return false, errFlaky
	}
	return f.Store.Put(ctx, sum, size, r)
}

// TestUploadMissingThroughRetries: a retrying store rewinds an upload's file between
// tries.
func TestUploadMissingThroughRetries(t *testing.T) {
	t.Parallel()
	rel := writeRelease(t, t.TempDir(), 8, 5)
	mem := store.NewMemory()
	// The first three Puts fail after reading half a file: each retry must rewind it.
	flaky := &flakyStore{Store: mem, failures: 3}
	st, err := publish.UploadMissing(context.Background(), store.WithRetry(flaky, 4, time.Millisecond), rel, publish.UploadOptions{Concurrency: 1})
	if err != nil {
		t.Fatalf("push through retries: %v", err)
	}
	if st.Uploaded != 5 {
		t.Errorf("uploaded %d, want 5", st.Uploaded)
	}
	assertPresent(t, mem, rel)
}
