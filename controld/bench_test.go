package controld_test

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/debian/sign"
	genindex "github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/internal/testkit/benchkit"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// benchServer is a controld over HTTP with a durable (fsync) bbolt state.
func benchServer(b *testing.B) (*client.Client, *store.Memory) {
	cl, cas, _ := benchServerWith(b)
	return cl, cas
}

// benchServerWith is benchServer that also returns the server.
func benchServerWith(b *testing.B) (*client.Client, *store.Memory, *controld.Server) {
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
	return client.New(hs.URL, secret, hs.Client()), cas, srv
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

// realFields gives a package of the benchmarks the fields a Debian stanza has, about 700
// bytes as varied as real ones, so that the index of 100,000 packages is about as
// large as a real one and compresses about as well (4 to 1 with gzip).
func realFields(p *manifest.Package) string {
	h := sha256.Sum256([]byte(p.Name))
	words := make([]string, 0, 40)
	for i := range 40 {
		words = append(words, benchWords[int(h[i%32]^byte(i*7))%len(benchWords)])
	}
	md5 := fmt.Sprintf("%x", md5.Sum([]byte(p.SHA256)))
	return fmt.Sprintf("Installed-Size: %d\nMaintainer: %s Maintainers <%s@lists.example.org>\n"+
		"Depends: libc6 (>= 2.%d), lib%s%d (>= %d.%d)\nSection: %s\nPriority: optional\n"+
		"Homepage: https://%s.example.org/\nDescription: %s\n %s\n %s\n .\n %s\nDescription-md5: %s\nMD5sum: %s\nSHA1: %x\n",
		100+int(h[0])*37, words[0], words[1], 30+int(h[1])%10, words[2], h[2]%9, h[3]%5, h[4]%20,
		words[3], p.Name, strings.Join(words[4:10], " "), strings.Join(words[10:22], " "), strings.Join(words[22:32], " "),
		strings.Join(words[32:], " "), md5, md5, h[:20])
}

var benchWords = strings.Fields(`a about access account add address after again all allows also an and any
	apt archive are as at automatic backup based be between binary build but by cache can client code command
	common compiler configuration contains control data database debian default dependencies description
	development devices directory display documentation driver editor engine example extension fast file files
	filesystem for format framework from functions gnu graphical handling header image implementation in
	includes information interface is it its kernel language layer libraries library lightweight linux manager
	module network of on open package packages plugin program protocol provides python runtime server service
	shared simple small source support system terminal that the this to tool tools used user using utilities
	utility version web which with written xml`)

// BenchmarkRecordAddOne measures recording and activating a release that adds one
// package to a repository of 100,000, published as armor build publishes it (one
// Packages.gz of chunked gzip members, Packages.xz, the plain index listed but not
// served), over HTTP with a durable bbolt state. The release before is recorded and
// active, as it is when a push follows the last one. Besides ns/op and B/op it reports
// peak-MiB: how much the process's peak resident memory grew during one recording.
// Building the first tree takes about a minute.
func BenchmarkRecordAddOne(b *testing.B) {
	cl, cas, _ := benchServerWith(b)
	ctx := context.Background()
	tr := bigActive(b, cl, cas, 100_000)
	var peak float64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		sum := tr.addOne(b, cas, i)
		benchkit.ResetPeak(b)
		rss := benchkit.MiB(b, "VmRSS")
		cpu0 := benchkit.CPU(b)
		b.StartTimer()
		if _, err := cl.RecordRelease(ctx, "big", sum, true, tr.m.Parent); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += benchkit.CPU(b) - cpu0
		peak = max(peak, benchkit.MiB(b, "VmHWM")-rss)
		b.StartTimer()
	}
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// bigActive records and activates, in repository "big", a release of n packages as
// armor build publishes them, and returns its tree.
func bigActive(b *testing.B, cl *client.Client, cas store.Store, n int) *tree {
	b.Helper()
	ctx := context.Background()
	key := loadKey(b, "eddsa")
	if _, err := cl.CreateRepo(ctx, api.CreateRepoRequest{Name: "big", Keys: []string{publicKey(b, key)}}); err != nil {
		b.Fatal(err)
	}
	chunks, err := genindex.OpenCache(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tr := newTree(b, "big", "", "1", key)
	tr.gz, tr.fields, tr.chunks = true, realFields, chunks
	for i := range n - 1 {
		name := fmt.Sprintf("p%05d", i)
		deb := fmt.Appendf(nil, "package %d\n", i)
		p := "pool/main/p/" + name + "/" + name + "_1_amd64.deb"
		tr.files[p] = deb
		tr.m.Packages = append(tr.m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name, Version: "1",
			Architecture: "amd64", Path: p, Size: int64(len(deb)), SHA256: digest(deb)})
	}
	tr.m.Sort()
	tr.index(b)
	if _, err := cl.RecordRelease(ctx, "big", tr.publish(b, cas), true, ""); err != nil {
		b.Fatal(err)
	}
	return tr
}

// addOne makes tr the next release, built on it, with one more package (the i-th of
// the benchmark, somewhere in the index), publishes it and returns its manifest's digest.
func (tr *tree) addOne(b *testing.B, cas store.Store, i int) string {
	b.Helper()
	tr.m.Parent, tr.m.ID = tr.m.ID, ""
	tr.nextSecond(b)
	tr.add(fmt.Sprintf("p%05da", (i*7919)%len(tr.m.Packages)), "1", fmt.Appendf(nil, "added %d\n", i))
	tr.index(b)
	return tr.publish(b, cas)
}
