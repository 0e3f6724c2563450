package gen_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
)

// TestNoInputs: an input pattern that matches no file fails the build before anything is
// written, naming the suite, component, pattern and where it looked, unless the suite
// allows being empty; then the same build succeeds.
func TestNoInputs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(r *repo, s *gen.Suite)
		want    gen.NoInputsError // Dir "base" and Missing "base/..." are relative to r.Base
		message string
	}{
		{"directory missing", func(r *repo, s *gen.Suite) {
			s.Inputs = map[string][]string{"main": {"debs/**/*.deb"}}
		}, gen.NoInputsError{Suite: "stable", Component: "main", Pattern: "debs/**/*.deb", Dir: "base", Missing: "base/debs"},
			`suite stable component main: input pattern "debs/**/*.deb" (relative to base) matches no file (base/debs does not exist): add .deb files there or fix the pattern, or let the suite be empty (allow_empty = true in its [[suite]])`},
		{"directory empty", func(r *repo, s *gen.Suite) {
			if err := os.Mkdir(filepath.Join(r.Base, "debs"), 0o755); err != nil {
				t.Fatal(err)
			}
			s.Inputs = map[string][]string{"main": {"debs/*.deb"}}
		}, gen.NoInputsError{Suite: "stable", Component: "main", Pattern: "debs/*.deb", Dir: "base"},
			`suite stable component main: input pattern "debs/*.deb" (relative to base) matches no file: add .deb files`},
		{"one of two patterns", func(r *repo, s *gen.Suite) {
			s.Inputs = map[string][]string{"main": {"in/**/*.deb", "in/*.dbe"}}
		}, gen.NoInputsError{Suite: "stable", Component: "main", Pattern: "in/*.dbe", Dir: "base"}, `input pattern "in/*.dbe"`},
		{"absolute pattern", func(r *repo, s *gen.Suite) {
			s.Inputs = map[string][]string{"main": {filepath.Join(r.Base, "in", "*.deb")}}
		}, gen.NoInputsError{Suite: "stable", Component: "main", Pattern: "base/in/*.deb"}, `input pattern "base/in/*.deb" matches no file: add`},
		{"second component", func(r *repo, s *gen.Suite) {
			s.Components = []string{"main", "contrib"}
			s.Inputs = map[string][]string{"main": {"in/**/*.deb"}, "contrib": {"contrib/*.deb"}}
		}, gen.NoInputsError{Suite: "stable", Component: "contrib", Pattern: "contrib/*.deb", Dir: "base", Missing: "base/contrib"}, "suite stable component contrib:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Synth: 2})
			tc.edit(r, &r.Opts.Suites[0])
			unbase := strings.NewReplacer(r.Base, "base")
			_, err := r.build()
			var got *gen.NoInputsError
			if !errors.As(err, &got) {
				t.Fatalf("build: %v, want a *gen.NoInputsError", err)
			}
			g := *got
			g.Pattern, g.Dir, g.Missing = unbase.Replace(g.Pattern), unbase.Replace(g.Dir), unbase.Replace(g.Missing)
			if g != tc.want {
				t.Errorf("error %+v\nwant  %+v", g, tc.want)
			}
			if msg := unbase.Replace(err.Error()); !strings.Contains(msg, tc.message) {
				t.Errorf("message %q\nwant it to contain %q", msg, tc.message)
			}
			ents, err := os.ReadDir(r.Base)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() != "in" && e.Name() != "cache" && e.Name() != "debs" {
					t.Errorf("the refused build left %s in %s", e.Name(), r.Base)
				}
			}

			r.Opts.Suites[0].AllowEmpty = true
			res := r.mustBuild()
			if _, err := os.Stat(r.tree("dists/stable/InRelease")); err != nil {
				t.Errorf("with allow_empty the build signs no release: %v (stats %+v)", err, res.Stats)
			}
		})
	}
}
