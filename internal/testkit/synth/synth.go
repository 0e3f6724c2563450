package synth

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Options describe a synthetic repository for Write.
type Options struct {
	N        int    // number of packages
	Seed     int64  // the same Options always give byte-identical files
	AllEvery int    // every AllEvery-th package is Architecture: all; 0 means 10, negative never
	Arch     string // architecture of the others; default "amd64"
	Version  string // version of every package; default "1.0-1"
}

func (o Options) withDefaults() Options {
	if o.AllEvery == 0 {
		o.AllEvery = 10
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Version == "" {
		o.Version = "1.0-1"
	}
	return o
}

// Name is the name of package i (counting from 0): "pkg000042".
func Name(i int) string { return fmt.Sprintf("pkg%06d", i) }

// Write creates o.N packages in dir, named pkgNNNNNN_VERSION_ARCH.deb (version
// without epoch), and returns their paths in package order. Package i depends on
// up to two packages numbered below it, so any of them can be installed. Work is
// spread over GOMAXPROCS workers; the output does not depend on their number.
func Write(dir string, o Options) ([]string, error) {
	o = o.withDefaults()
	if o.N < 0 {
		return nil, fmt.Errorf("write synthetic packages: negative count %d", o.N)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write synthetic packages: %w", err)
	}
	paths := make([]string, o.N)
	var next atomic.Int64
	var failed atomic.Bool
	// Twice as many workers as processors, so that one blocked writing a file
	// does not leave a processor idle.
	errs := make([]error, 2*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e encoder
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= o.N {
					return
				}
				p, err := e.writeSynthetic(dir, o, i)
				if err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
				paths[i] = p
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("write synthetic packages: %w", err)
	}
	return paths, nil
}

func (e *encoder) writeSynthetic(dir string, o Options, i int) (string, error) {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)))
	arch := o.Arch
	if o.AllEvery > 0 && (i+1)%o.AllEvery == 0 {
		arch = "all"
	}
	var deps []string
	if i > 0 {
		n := rng.IntN(3)
		first := -1
		for k := 0; k < n; k++ {
			j := rng.IntN(i)
			if j != first {
				deps = append(deps, Name(j))
				first = j
			}
		}
	}
	return e.write(dir, Name(i), o.Version, arch, strings.Join(deps, ", "), rng)
}

// WriteOne writes a single synthetic package with the given identity into dir
// and returns its path. depends is copied into a Depends field unless empty. The
// content is derived from name, version and arch alone.
func WriteOne(dir, name, version, arch, depends string) (string, error) {
	h := fnv.New64a()
	h.Write([]byte(name + "\x00" + version + "\x00" + arch))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	var e encoder
	p, err := e.write(dir, name, version, arch, depends, rng)
	if err != nil {
		return "", fmt.Errorf("write synthetic package %s: %w", name, err)
	}
	return p, nil
}

func (e *encoder) write(dir, name, version, arch, depends string, rng *rand.Rand) (string, error) {
	payload := make([]byte, 2048+rng.IntN(2048))
	for i := 0; i < len(payload); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8 && i+k < len(payload); k++ {
			payload[i+k] = byte(v >> (8 * k))
		}
	}
	control := Control(name, version, arch, depends, len(payload), rng)
	b, err := e.encode(Deb{
		Control:   control,
		Files:     []File{{Path: "usr/share/doc/" + name + "/README", Data: payload}},
		StoreData: true,
	})
	if err != nil {
		return "", err
	}
	v := version
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	p := filepath.Join(dir, name+"_"+v+"_"+arch+".deb")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

var (
	sections = []string{"admin", "devel", "doc", "libs", "misc", "net", "utils", "web"}
	words    = strings.Fields(`apt archive build cache client daemon data debian
		edge fast file hash index key layer library manifest mirror network object
		package pool publish release repository server sign store stream test tool`)
)

// Control returns the control file of a synthetic package: Package, Version,
// Architecture, Maintainer, Installed-Size (for a payload of the given size),
// Depends when not empty, Section, Priority and a Description with a long part
// of two paragraphs. rng picks the section and the words.
func Control(name, version, arch, depends string, payload int, rng *rand.Rand) []byte {
	var b strings.Builder
	b.Grow(768)
	b.WriteString("Package: " + name + "\nVersion: " + version + "\nArchitecture: " + arch + "\n")
	b.WriteString("Maintainer: Armor Test Suite <synth@example.invalid>\n")
	b.WriteString("Installed-Size: " + strconv.Itoa((payload+1023)/1024+1) + "\n")
	if depends != "" {
		b.WriteString("Depends: " + depends + "\n")
	}
	b.WriteString("Section: " + sections[rng.IntN(len(sections))] + "\nPriority: optional\n")
	b.WriteString("Description: synthetic package " + name + " for armor tests\n")
	for para := 0; para < 2; para++ {
		if para > 0 {
			b.WriteString(" .\n")
		}
		for line := 0; line < 2+rng.IntN(3); line++ {
			b.WriteByte(' ')
			for w := 0; w < 8+rng.IntN(4); w++ {
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(words[rng.IntN(len(words))])
			}
			b.WriteString(".\n")
		}
	}
	return []byte(b.String())
}
