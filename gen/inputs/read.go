package inputs

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/armor-apt/armor/debian/deb"
	"golang.org/x/sync/errgroup"
)

// Input is one package file named by the configuration (.deb, .udeb, .ddeb or .dsc), with
// what the build knows of it.
type Input struct {
	Path    string
	Size    int64
	MtimeNs int64
	// Known from the stat cache or from reading the file.
	SHA256                              string
	Name, Version, Architecture, Source string
	// Pkg is set when the file was read in this build; its stanza is fresh.
	Pkg *deb.Package
	// Src is set instead for a source package (.dsc) read in this build.
	Src *deb.Source
}

// Fresh reports whether the input was read in this build.
func (in *Input) Fresh() bool { return in.Pkg != nil || in.Src != nil }

// IsSource reports whether a path names a source package's .dsc.
func IsSource(path string) bool { return strings.HasSuffix(path, ".dsc") }

// ReadSource reads a .dsc input and what the build needs of it.
func (in *Input) ReadSource() error {
	s, err := deb.ReadDscFile(in.Path)
	if err != nil {
		return err
	}
	if s.Size != in.Size {
		return fmt.Errorf("%s: changed while being read", in.Path)
	}
	in.Src = s
	in.SHA256 = s.SHA256
	in.Name, in.Version, in.Architecture, in.Source = s.Name, s.Version, "source", s.Name
	return nil
}

// Ext returns the extension an input's pool file keeps: .udeb, .ddeb or .deb.
func Ext(path string) string {
	for _, e := range []string{".udeb", ".ddeb"} {
		if strings.HasSuffix(path, e) {
			return e
		}
	}
	return ".deb"
}

// Read returns the inputs of files (sorted by path, each once): those the stat cache
// vouches for (same size and mtime, unless verify) as it knows them, the others read, in
// parallel. It returns how many it read. progress, when not nil, is called after each read
// from several goroutines.
func Read(ctx context.Context, files []File, cache *StatCache, verify bool, progress func(done, total int)) ([]*Input, int, error) {
	ins := make([]*Input, len(files))
	slab := make([]Input, len(files))
	var toRead []int
	cached, k := cache.Entries, 0
	for i, f := range files {
		p, st := f.Path, f.st
		if !st.regular {
			return nil, 0, fmt.Errorf("read input %s: not a regular file (a pattern in armor.toml matched it; make the pattern match only .deb, .udeb, .ddeb or .dsc files)", p)
		}
		in := &slab[i]
		*in = Input{Path: p, Size: st.size, MtimeNs: st.mtimeNs}
		for k < len(cached) && cached[k].Path < p {
			k++ // files and the cache are both sorted by path
		}
		if k < len(cached) && cached[k].Path == p && !verify &&
			cached[k].Size == in.Size && cached[k].MtimeNs == in.MtimeNs && cached[k].SHA256 != "" {
			*in = cached[k]
			in.Pkg, in.Src = nil, nil
		} else {
			toRead = append(toRead, i)
		}
		ins[i] = in
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	var done atomic.Int64
	for _, i := range toRead {
		in := ins[i]
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if IsSource(in.Path) {
				if err := in.ReadSource(); err != nil {
					return err
				}
				if progress != nil {
					progress(int(done.Add(1)), len(toRead))
				}
				return nil
			}
			pkg, err := deb.ReadFile(in.Path)
			if err != nil {
				return err
			}
			if t, _ := pkg.Value("Package-Type"); t == "udeb" && Ext(in.Path) != ".udeb" {
				return fmt.Errorf("%s: field Package-Type: an installer package (udeb) must be named .udeb, so that it is listed only in the debian-installer index: rename the file", in.Path)
			}
			if pkg.Size != in.Size {
				return fmt.Errorf("%s: changed while being read", in.Path)
			}
			in.Pkg = pkg
			in.SHA256 = pkg.SHA256
			in.Name, in.Version, in.Architecture, in.Source = pkg.Name, pkg.Version, pkg.Architecture, pkg.Source
			if progress != nil {
				progress(int(done.Add(1)), len(toRead))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return ins, len(toRead), nil
}
