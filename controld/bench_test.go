package controld_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// benchServer is a controld over HTTP with a durable (fsync) bbolt state.
func benchServer(b *testing.B) (*client.Client, *store.Memory) {
	b.Helper()
	dir := b.TempDir()
	secret, err := controld.CreateToken(dir, "root", []string{"*"}, []string{"admin", "push", "activate"})
	if err != nil {
		b.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, controld.DBFile), nil)
	if err != nil {
		b.Fatal(err)
	}
	cas := store.NewMemory()
	srv, err := controld.NewServer(controld.Config{}, cas, st)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { hs.Close(); st.Close() })
	return client.New(hs.URL, secret, hs.Client()), cas
}

// BenchmarkActivate measures one compare-and-swap flip over HTTP, committed with fsync.
func BenchmarkActivate(b *testing.B) {
	cl, cas := benchServer(b)
	ctx := context.Background()
	key := loadKey(b, "eddsa")
	if _, err := cl.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Keys: []string{publicKey(b, key)}}); err != nil {
		b.Fatal(err)
	}
	t1 := newTree(b, "demo", "", "1", key)
	s1 := t1.publish(b, cas)
	t2 := newTree(b, "demo", t1.m.ID, "2", key)
	s2 := t2.publish(b, cas)
	if _, err := cl.RecordRelease(ctx, "demo", s1, true, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := cl.RecordRelease(ctx, "demo", s2, false, ""); err != nil {
		b.Fatal(err)
	}
	ids := [2]string{t1.m.ID, t2.m.ID}
	b.ResetTimer()
	for i := range b.N {
		if _, err := cl.Activate(ctx, "demo", ids[(i+1)%2], ids[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecord measures recording a release of n pool files: "full" checks every
// object in the store, "incremental" adds one file to the active release.
func BenchmarkRecord(b *testing.B) {
	const n = 5000
	for _, mode := range []string{"full", "incremental"} {
		b.Run(fmt.Sprintf("%s/%d-objects", mode, n), func(b *testing.B) {
			cl, cas := benchServer(b)
			ctx := context.Background()
			key := loadKey(b, "eddsa")
			for i := range b.N {
				b.StopTimer()
				repo := fmt.Sprintf("r%d", i)
				if _, err := cl.CreateRepo(ctx, api.CreateRepoRequest{Name: repo, Keys: []string{publicKey(b, key)}}); err != nil {
					b.Fatal(err)
				}
				base := bigTree(b, repo, "", key, n)
				sum := base.publish(b, cas)
				if mode == "incremental" {
					if _, err := cl.RecordRelease(ctx, repo, sum, true, ""); err != nil {
						b.Fatal(err)
					}
					next := bigTree(b, repo, base.m.ID, key, n+1)
					sum = next.publish(b, cas)
				}
				b.StartTimer()
				if _, err := cl.RecordRelease(ctx, repo, sum, false, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bigTree is newTree with n extra pool files.
func bigTree(b *testing.B, repo, parent string, key *sign.Key, n int) *tree {
	b.Helper()
	tr := newTree(b, repo, parent, "1", key)
	for i := range n {
		data := fmt.Appendf(nil, "pool file %d\n", i)
		p := fmt.Sprintf("pool/main/p/p%05d/p%05d_1_all.deb", i, i)
		tr.files[p] = data
		tr.m.Packages = append(tr.m.Packages, manifest.Package{Suite: "stable", Component: "main",
			Name: fmt.Sprintf("p%05d", i), Version: "1", Architecture: "all", Path: p, Size: int64(len(data)), SHA256: digest(data)})
	}
	tr.m.Sort()
	tr.index(b)
	return tr
}
