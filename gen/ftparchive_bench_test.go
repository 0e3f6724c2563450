package gen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkFirstBuildVsFtparchive10k puts a first build of 10,000 packages beside
// `apt-ftparchive generate` making the same outputs from the same .deb files, in one run:
//
//	go test ./gen -run '^$' -bench FirstBuildVsFtparchive10k -benchtime 3x
//
// Both write Packages, Packages.gz, Packages.xz and Contents-amd64.gz for one suite, from
// an empty tree and an empty cache each time (apt-ftparchive's cache database included).
// armor also copies every .deb into its pool (armor-link: links it, as [output]
// pool_files = "link" asks), writes by-hash copies and Release, and signs InRelease and
// Release.gpg; apt-ftparchive indexes the .deb files where they lie and signs nothing, so
// the comparison flatters it. Each sub-benchmark reports its Packages.xz size.
func BenchmarkFirstBuildVsFtparchive10k(b *testing.B) {
	if _, err := exec.LookPath("apt-ftparchive"); err != nil {
		b.Fatalf("apt-ftparchive (apt-utils) is needed: make deps installs it: %v", err)
	}
	debs := benchDebs(b, 10_000)
	armor := func(b *testing.B, link bool) {
		var m meter
		b.StopTimer()
		for range b.N {
			r := newBenchRepo(b, debs)
			r.Opts.LinkPool = link
			m.start(b)
			res, build := r.build(b)
			m.stop(b, build)
			if res.Stats.Packages != 10_000 || link && res.Stats.FilesLinked != 10_000 {
				b.Fatalf("stats %+v", res.Stats)
			}
			reportSize(b, filepath.Join(r.Opts.TreeDir, "dists/stable/main/binary-amd64/Packages.xz"))
		}
		m.report(b)
	}
	b.Run("armor", func(b *testing.B) { armor(b, false) })
	b.Run("armor-link", func(b *testing.B) { armor(b, true) })
	b.Run("apt-ftparchive", func(b *testing.B) {
		b.StopTimer()
		var took time.Duration
		for range b.N {
			root := benchTempDir(b)
			for _, d := range []string{"pool", "cache", "dists/stable/main/binary-amd64"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.Symlink(debs, filepath.Join(root, "pool/main")); err != nil {
				b.Fatal(err)
			}
			conf := filepath.Join(root, "generate.conf")
			if err := os.WriteFile(conf, fmt.Appendf(nil, `Dir { ArchiveDir %q; CacheDir %q; };
Default { Packages::Compress ". gzip xz"; Contents::Compress "gzip"; };
TreeDefault {
  Directory "pool/$(SECTION)";
  Packages "$(DIST)/$(SECTION)/binary-$(ARCH)/Packages";
  Contents "$(DIST)/$(SECTION)/Contents-$(ARCH)";
};
Tree "dists/stable" { Sections "main"; Architectures "amd64"; };
`, root, filepath.Join(root, "cache")), 0o644); err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command("apt-ftparchive", "-q", "generate", conf)
			start := time.Now()
			b.StartTimer()
			out, err := cmd.CombinedOutput()
			b.StopTimer()
			took += time.Since(start)
			if err != nil {
				b.Fatalf("apt-ftparchive generate: %v\n%s", err, out)
			}
			reportSize(b, filepath.Join(root, "dists/stable/main/binary-amd64/Packages.xz"))
		}
		b.ReportMetric(float64(took)/float64(time.Millisecond)/float64(b.N), "build-ms")
	})
}

func reportSize(b *testing.B, path string) {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size()), "xz-bytes")
}
