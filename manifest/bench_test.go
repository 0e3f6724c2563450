package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Benchmarks at the size an incremental build must handle in under a second in all:
// 100,000 packages. Targets: Load <= 100 ms, Validate <= 35 ms, SealMarshal <= 60 ms.
//
//	go test ./manifest/ -run '^$' -bench 100k -benchmem
//
// realManifest builds, deterministically and in memory, a manifest shaped like the one
// `armor build` writes for a large repository: several suites, components and
// architectures, Debian-style names, versions and pool paths, a distinct digest per
// package, some packages (arch all, or shared between suites) sharing one pool file, and
// the generated indexes with their by-hash copies.
func realManifest(n int) *Manifest {
	digest := func(kind string, i int) string {
		s := sha256.Sum256(fmt.Appendf(nil, "%s %d", kind, i))
		return hex.EncodeToString(s[:])
	}
	m := &Manifest{Schema: SchemaVersion, Repository: "bench", Date: "2026-11-22T00:00:00Z", Parent: digest("parent", 0)}
	suites := []string{"bookworm", "trixie"}
	comps := []string{"contrib", "main", "non-free"}
	arches := []string{"all", "amd64", "arm64", "i386"}
	m.Packages = make([]Package, 0, n)
	for i := 0; len(m.Packages) < n; i++ {
		comp := comps[i%len(comps)]
		if i%5 != 0 {
			comp = "main"
		}
		src := fmt.Sprintf("lib%sfoo%d", []string{"", "x", "gtk-", "python3-"}[i%4], i)
		prefix := src[:1]
		if len(src) > 3 && src[:3] == "lib" {
			prefix = src[:4]
		}
		version := fmt.Sprintf("%d.%d.%d-%d", i%7, i%13, i%101, 1+i%3)
		if i%9 == 0 {
			version = "1:" + version + "+deb12u1"
		}
		arch := arches[i%len(arches)]
		path := fmt.Sprintf("pool/%s/%s/%s/%s_%s_%s.deb", comp, prefix, src, src, version, arch)
		p := Package{Suite: "bookworm", Component: comp, Name: src, Version: version, Architecture: arch, Path: path, Size: int64(1000 + i*37%500000), SHA256: digest("deb", i)}
		m.Packages = append(m.Packages, p)
		if i%4 == 0 && len(m.Packages) < n {
			// The same pool file published in a second suite.
			p.Suite = "trixie"
			m.Packages = append(m.Packages, p)
		}
	}
	for si, s := range suites {
		for ci, c := range comps {
			for ai, a := range arches[1:] {
				for ei, ext := range []string{"", ".gz", ".xz"} {
					k := ((si*len(comps)+ci)*len(arches)+ai)*3 + ei
					sum := digest("index", k)
					m.Files = append(m.Files,
						File{fmt.Sprintf("dists/%s/%s/binary-%s/Packages%s", s, c, a, ext), int64(100000 + k), sum},
						File{fmt.Sprintf("dists/%s/%s/binary-%s/by-hash/SHA256/%s", s, c, a, sum), int64(100000 + k), sum})
				}
			}
		}
		m.Files = append(m.Files,
			File{"dists/" + s + "/InRelease", 5000, digest("inrelease", si)},
			File{"dists/" + s + "/Release", 4000, digest("release", si)},
			File{"dists/" + s + "/Release.gpg", 800, digest("release.gpg", si)})
	}
	if err := Seal(m); err != nil {
		panic(err)
	}
	return m
}

// cpuTime is the CPU time this process has used, all threads together.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCPU reports cpu-ms/op beside the wall time: the benchmark machine is shared, and
// the CPU time an operation takes varies less with the load than its wall time.
func measureCPU(b *testing.B, run func()) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		run()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N)/1e6, "cpu-ms/op")
}

func TestRealManifestIsValid(t *testing.T) {
	m := realManifest(2000)
	if len(m.Packages) != 2000 {
		t.Fatalf("%d packages", len(m.Packages))
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parseCanonical(data); !ok {
		t.Fatal("the fast decoder rejects the benchmark manifest")
	}
	if _, err := Parse(data, "bench"); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLoad100k(b *testing.B) {
	data, err := Marshal(realManifest(100000))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "manifest.toml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	measureCPU(b, func() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkValidate100k(b *testing.B) {
	m := realManifest(100000)
	measureCPU(b, func() {
		if err := m.Validate(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkSealMarshal100k is what a build does with its new manifest: seal it, then
// encode it for writing; "separate" is the same by Seal then Marshal.
func BenchmarkSealMarshal100k(b *testing.B) {
	m := realManifest(100000)
	b.Run("SealMarshal", func(b *testing.B) {
		measureCPU(b, func() {
			if _, err := SealMarshal(m); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("separate", func(b *testing.B) {
		measureCPU(b, func() {
			if err := Seal(m); err != nil {
				b.Fatal(err)
			}
			if _, err := Marshal(m); err != nil {
				b.Fatal(err)
			}
		})
	})
}
