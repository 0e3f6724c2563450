package synth

import "testing"

// BenchmarkWrite measures writing synthetic packages, per package.
func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	if _, err := Write(dir, Options{N: b.N, Seed: 1}); err != nil {
		b.Fatal(err)
	}
}
