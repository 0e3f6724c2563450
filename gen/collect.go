package gen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/armor-apt/armor/gen/inputs"
	"github.com/bmatcuk/doublestar/v4"
)

// inputGroup is the inputs of one suite's component.
type inputGroup struct {
	suite     Suite
	comp      string
	files     []inputs.File // sorted by path, each once
	unmatched []string      // input patterns that matched no file
}

// inputSet is every input of a build, with what is known of each.
type inputSet struct {
	all   []*inputs.Input          // sorted by path, each path once
	fresh map[string]*inputs.Input // by digest: the inputs read in this build
	read  int                      // how many were read in this build
	kept  []string                 // the stat cache's Kept: tree paths for the next build to delete

	mu    sync.Mutex               // forSum runs from the pool stager and the index writer
	bySum map[string]*inputs.Input // by digest: every input, made when first needed
}

// inputSpec is what collectInputs needs of the options.
type inputSpec struct {
	base     string // Options.BaseDir
	suites   []Suite
	add      []Addition
	verify   bool                  // read every input, trusting no stat cache
	progress func(done, total int) // nil, or told of each input read
}

func (o *Options) inputSpec() inputSpec {
	return inputSpec{o.BaseDir, o.Suites, o.Add, o.Verify, o.progressOf("read")}
}

// collectInputs lists the inputs of every suite's components and reads those the stat
// cache (received from statCache once the listing is done) cannot vouch for.
func collectInputs(ctx context.Context, sp inputSpec, statCache <-chan *inputs.StatCache) ([]inputGroup, *inputSet, error) {
	var groups []inputGroup
	for _, s := range sp.suites {
		for _, comp := range s.Components {
			files, unmatched, err := inputs.Expand(ctx, sp.base, s.Inputs[comp])
			if err != nil {
				return nil, nil, fmt.Errorf("suite %s component %s: %w", s.Codename, comp, err)
			}
			if files, err = withAdditions(files, sp.add, s.Codename, comp); err != nil {
				return nil, nil, err
			}
			files = inputs.PackageFiles(files)
			groups = append(groups, inputGroup{s, comp, files, unmatched})
		}
	}
	var files []inputs.File
	if len(groups) == 1 {
		files = groups[0].files // sorted and distinct already
	} else {
		for _, g := range groups {
			files = append(files, g.files...)
		}
		files = inputs.Sorted(files)
	}
	cache := <-statCache
	all, read, err := inputs.Read(ctx, files, cache, sp.verify, sp.progress)
	if err != nil {
		return nil, nil, err
	}
	ins := &inputSet{all: all, read: read, kept: cache.Kept, fresh: map[string]*inputs.Input{}}
	cache.Entries = nil // all holds what the build needs of them
	for _, in := range all {
		if in.Fresh() {
			ins.fresh[in.SHA256] = in
		}
	}
	return groups, ins, nil
}

// withAdditions adds the files of additions to a suite's component to its inputs.
func withAdditions(files []inputs.File, adds []Addition, suite, comp string) ([]inputs.File, error) {
	n := len(files)
	for _, a := range adds {
		if a.Suite == suite && a.Component == comp {
			files = append(files, inputs.File{Path: a.Path})
		}
	}
	if len(files) == n {
		return files, nil
	}
	if err := inputs.Stat(files[n:]); err != nil {
		return nil, err
	}
	return inputs.Sorted(files), nil
}

// checkUnmatched refuses an input pattern that matched no file where that would publish
// a release without packages it should have: in a first build, or in a suite that mirrors
// its inputs. Otherwise the parent holds the packages, and a pattern that matches nothing
// adds nothing. A suite with AllowEmpty may always be empty.
func checkUnmatched(base string, groups []inputGroup, first bool) error {
	for _, g := range groups {
		if len(g.unmatched) > 0 && !g.suite.AllowEmpty && (first || g.suite.Sync) {
			return noInputs(base, g.suite.Codename, g.comp, g.unmatched[0])
		}
	}
	return nil
}

// NoInputsError is the error of a build in which an input pattern of a suite that may
// not be empty (Suite.AllowEmpty) matches no file: a typo in the pattern, or .deb files
// not yet in place, would otherwise publish a signed release without those packages.
type NoInputsError struct {
	Suite, Component, Pattern string
	Dir                       string // what a relative Pattern was resolved against; "" for an absolute one
	Missing                   string // the pattern's fixed leading directory, when it does not exist
}

func (e *NoInputsError) Error() string {
	where := ""
	if e.Dir != "" {
		where = " (relative to " + e.Dir + ")"
	}
	missing := ""
	if e.Missing != "" {
		missing = " (" + e.Missing + " does not exist)"
	}
	return fmt.Sprintf("suite %s component %s: input pattern %q%s matches no file%s: add .deb files there or fix the pattern, or let the suite be empty (allow_empty = true in its [[suite]])",
		e.Suite, e.Component, e.Pattern, where, missing)
}

// noInputs describes a pattern that matched nothing, saying where it looked.
func noInputs(base, suite, comp, pat string) error {
	e := &NoInputsError{Suite: suite, Component: comp, Pattern: pat}
	full := pat
	if !filepath.IsAbs(pat) {
		e.Dir, full = base, filepath.Join(base, pat)
	}
	if root, _ := doublestar.SplitPattern(filepath.ToSlash(full)); root != "" {
		if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
			e.Missing = filepath.FromSlash(root)
		}
	}
	return e
}

// forSum returns an input file whose digest is sum, preferring one read in this build
// (its stanza is at hand). It is nil when no input has that digest.
func (s *inputSet) forSum(sum string) *inputs.Input {
	if in, ok := s.fresh[sum]; ok {
		return in
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySum == nil {
		s.bySum = make(map[string]*inputs.Input, len(s.all))
		for _, in := range s.all {
			s.bySum[in.SHA256] = in
		}
	}
	return s.bySum[sum]
}
