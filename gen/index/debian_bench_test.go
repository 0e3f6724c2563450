package index

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/ulikunitz/xz"
)

// The size of Packages.xz against xz's own (issue 6: at most 1.15 times `xz -6` of the same
// Packages, on a Packages of bookworm main's size). The benchmarks below use Debian's own
// bookworm main amd64 Packages, fetched once from deb.debian.org and kept decompressed in
// os.TempDir(), or the plain Packages file named by ARMOR_BENCH_PACKAGES. When neither is
// to be had they fall back to synthetic stanzas of the same total size, and say so in the
// log; the ratio then describes the synthetic text, not Debian's. They need the xz
// command (Debian package xz-utils). Run them with -benchtime 1x: one op of
// BenchmarkDebianXZ compresses 50 MB.

const debianPackagesURL = "https://deb.debian.org/debian/dists/bookworm/main/binary-amd64/Packages.xz"

// debianIndex is the stanzas the benchmarks build, and where they come from.
type debianIndex struct {
	stanzas [][]byte
	src     string
}

var debianStanzas = sync.OnceValues(func() (debianIndex, error) {
	plain, src, err := debianPackages()
	if err != nil {
		// Debian's bookworm main amd64 Packages: 50 MB in 63,440 stanzas.
		return debianIndex{synthStanzas(50_000_000/730, 1), fmt.Sprintf("synthetic stanzas (%v)", err)}, nil
	}
	stanzas, ok := splitPlain(plain)
	if !ok {
		return debianIndex{}, fmt.Errorf("%s: not a list of stanzas each followed by a blank line", src)
	}
	return debianIndex{stanzas, src}, nil
})

// debianPackages returns the plain Packages named by ARMOR_BENCH_PACKAGES, else Debian's,
// from the copy in os.TempDir() or fetched into it.
func debianPackages() ([]byte, string, error) {
	if p := os.Getenv("ARMOR_BENCH_PACKAGES"); p != "" {
		b, err := os.ReadFile(p)
		return b, p, err
	}
	cached := filepath.Join(os.TempDir(), "armor-bench-debian-bookworm-main-amd64-Packages")
	if b, err := os.ReadFile(cached); err == nil {
		return b, cached, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, debianPackagesURL, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", debianPackagesURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("fetch %s: %s", debianPackagesURL, resp.Status)
	}
	zr, err := xz.NewReader(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", debianPackagesURL, err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", debianPackagesURL, err)
	}
	if err := atomicfile.WriteFile(cached, plain, 0o644); err != nil {
		return nil, "", err
	}
	return plain, debianPackagesURL + " (kept as " + cached + ")", nil
}

// xzSize returns the size of `xz args...` of plain.
func xzSize(b *testing.B, plain []byte, args ...string) int {
	b.Helper()
	n, err := runXZ(plain, args...)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// runXZ returns the size of `xz args...` of plain.
func runXZ(plain []byte, args ...string) (int, error) {
	cmd := exec.Command("xz", append([]string{"-T1", "-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(plain)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("xz %v (install xz-utils): %w", args, err)
	}
	return len(out), nil
}

// BenchmarkDebianXZ builds the index of Debian's bookworm main amd64 Packages without a
// cache and reports its Packages.xz beside `xz -6` of the same plain file. xz-MB,
// xz6-MB and xz/xz6 are the figures; gz-MB is Packages.gz.
func BenchmarkDebianXZ(b *testing.B) {
	idx, err := debianStanzas()
	if err != nil {
		b.Fatal(err)
	}
	stanzas := idx.stanzas
	b.Logf("stanzas: %d from %s", len(stanzas), idx.src)
	var f *Files
	for b.Loop() {
		if f, err = Build(stanzas, nil, "debian"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	xz6 := xzSize(b, f.Plain, "-6")
	reportSizes(b, f)
	b.ReportMetric(float64(xz6)/1e6, "xz6-MB")
	b.ReportMetric(float64(len(f.Xz))/float64(xz6), "xz/xz6")
}

// BenchmarkDebianXZBlocks shows where Packages.xz loses against `xz -6`, on the same
// Packages: the matcher and parser, and the size of the blocks compressed independently.
// "armor" builds Packages.xz from chunks cut with the sizes given (chunkShapes, and one of
// 512 KiB on average); "xz" runs `xz -6` and the fast preset `xz -3` with --block-size
// (0: one block). Each reports its size in MB and its
// ratio to `xz -6` in one block (x-xz6).
func BenchmarkDebianXZBlocks(b *testing.B) {
	idx, err := debianStanzas()
	if err != nil {
		b.Fatal(err)
	}
	stanzas := idx.stanzas
	b.Logf("stanzas: %d from %s", len(stanzas), idx.src)
	hashes, err := hashStanzas(stanzas)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := Build(stanzas, nil, "debian")
	if err != nil {
		b.Fatal(err)
	}
	whole := xzSize(b, plain.Plain, "-6")
	b.Logf("xz -6: %d bytes", whole)
	report := func(b *testing.B, size int) {
		b.ReportMetric(float64(size)/1e6, "MB")
		b.ReportMetric(float64(size)/float64(whole), "x-xz6")
	}
	for _, preset := range []string{"-6", "-3"} {
		for _, bs := range []int{0, 128 << 10, 256 << 10, 512 << 10, 1 << 20} {
			if preset == "-6" && bs == 0 {
				continue // whole
			}
			b.Run(fmt.Sprintf("xz%s/block=%dKiB", preset, bs>>10), func(b *testing.B) {
				args := []string{preset}
				if bs > 0 {
					args = append(args, "--block-size="+strconv.Itoa(bs))
				}
				var size int
				for b.Loop() {
					size = xzSize(b, plain.Plain, args...)
				}
				report(b, size)
			})
		}
	}
	for _, ctx := range []string{"none", "previous"} {
		b.Run("xz-6/chunk=128KiB/context="+ctx, func(b *testing.B) {
			chunks, _ := layout(stanzas, defaultChunking.cut(stanzas, hashes))
			var size int
			for b.Loop() {
				size = chunkContextSize(b, plain.Plain, chunks, ctx == "previous")
			}
			report(b, size)
		})
	}
	shapes := append(slices.Clone(chunkShapes), chunking{min: 128 << 10, avg: 512 << 10, max: 2 << 20})
	for _, ck := range shapes {
		b.Run("armor/"+ck.String(), func(b *testing.B) {
			var size int
			for b.Loop() {
				f, err := build(stanzas, nil, "debian", ck, nil)
				if err != nil {
					b.Fatal(err)
				}
				size = len(f.Xz)
			}
			report(b, size)
		})
	}
}

// chunkContextSize returns the total size of raw LZMA2 data (`xz -6 --format=raw`) of each
// chunk compressed on its own, or, with previous, of each chunk compressed after the
// chunk before it: the size of the previous chunk and the current one compressed together,
// less that of the previous one alone. The latter estimates a stream whose chunks may
// refer back into the previous chunk only, so that a changed chunk changes the compressed
// bytes of itself and of the chunk after it. The estimate is optimistic by the LZMA2
// state reset such a stream needs at each chunk, which xz cannot show.
func chunkContextSize(b *testing.B, plain []byte, chunks []chunk, previous bool) int {
	b.Helper()
	raw := func(p []byte) (int, error) { return runXZ(p, "--format=raw", "--lzma2=preset=6") }
	sizes := make([]int, len(chunks))
	if err := parallel(len(chunks), func(i int) error {
		ch := chunks[i]
		var err error
		if !previous || i == 0 {
			sizes[i], err = raw(plain[ch.off : ch.off+ch.size])
			return err
		}
		prev := chunks[i-1]
		both, err := raw(plain[prev.off : ch.off+ch.size])
		if err != nil {
			return err
		}
		alone, err := raw(plain[prev.off:ch.off])
		sizes[i] = both - alone
		return err
	}); err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	return total
}
