// Command synth writes a synthetic repository's worth of .deb files:
//
//	go run ./cmd/synth -n 10000 -o DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

func main() {
	var o synth.Options
	out := flag.String("o", "", "directory to write the packages to (required)")
	flag.IntVar(&o.N, "n", 1000, "number of packages")
	flag.Int64Var(&o.Seed, "seed", 1, "seed; the same flags give the same files")
	flag.IntVar(&o.AllEvery, "all-every", 10, "every Nth package is Architecture: all (negative: none)")
	flag.StringVar(&o.Arch, "arch", "amd64", "architecture of the other packages")
	flag.StringVar(&o.Version, "version", "1.0-1", "version of every package")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	paths, err := synth.Write(*out, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "wrote %d packages to %s in %s\n", len(paths), *out, time.Since(start).Round(time.Millisecond))
}
