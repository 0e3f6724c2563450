package gate

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func pkgsOf(t testing.TB, text string) []Package {
	t.Helper()
	pkgs, err := ReadPackages([]byte(text), "stable/main")
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func brokenIDs(r *Report) []string {
	var out []string
	for _, f := range r.Broken {
		s := f.Package.ID() + " on " + f.Architecture
		if f.Existing {
			s += " (existing)"
		}
		out = append(out, s)
	}
	return out
}

const (
	fooNeedsBar3 = "Package: foo\nVersion: 2.0\nArchitecture: amd64\nDepends: libc6 (>= 2.36), libbar (>= 3)\n\n"
	libbar29     = "Package: libbar\nVersion: 2.9\nArchitecture: amd64\nDepends: libc6\n\n"
	libbar3      = "Package: libbar\nVersion: 3.0\nArchitecture: amd64\nDepends: libc6\n\n"
)

func TestCheckWithoutBase(t *testing.T) {
	for _, c := range []struct {
		name     string
		release  string
		broken   []string
		external []string
	}{
		{"a name the repository does not list is reported, not refused", libbar3 + fooNeedsBar3, nil, []string{"libc6"}},
		{"a version the repository lacks is refused", libbar29 + fooNeedsBar3, []string{"foo 2.0 (amd64) on amd64"}, []string{"libc6"}},
		{"a conflict among its own packages is refused", "Package: a\nVersion: 1\nArchitecture: all\nDepends: b, c\n\nPackage: b\nVersion: 1\nArchitecture: amd64\nConflicts: c\n\nPackage: c\nVersion: 1\nArchitecture: amd64\n\n",
			[]string{"a 1 (all) on amd64", "a 1 (all) on arm64"}, nil},
		{"an architecture the name lacks is refused", "Package: a\nVersion: 1\nArchitecture: all\nDepends: b\n\nPackage: b\nVersion: 1\nArchitecture: amd64\n\n",
			[]string{"a 1 (all) on arm64"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Suite{Codename: "stable", Architectures: []string{"amd64", "arm64"}, Release: pkgsOf(t, c.release)}
			r := mustCheck(t, s)
			if got := brokenIDs(r); !slices.Equal(got, c.broken) {
				t.Fatalf("broken %q, want %q", got, c.broken)
			}
			var ext []string
			for n := range r.External {
				ext = append(ext, n)
			}
			if !slices.Equal(ext, c.external) {
				t.Fatalf("external %q, want %q", ext, c.external)
			}
			for _, f := range r.Broken {
				if len(f.Reasons) == 0 {
					t.Fatalf("%s has no reason", f.Package.ID())
				}
			}
		})
	}
}

func TestCheckWithBase(t *testing.T) {
	base := pkgsOf(t, "Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nMulti-Arch: same\n\n")
	s := &Suite{Codename: "stable", Architectures: []string{"amd64"}, HasBase: true, Base: map[string][]Package{"amd64": base},
		Release: pkgsOf(t, libbar3+fooNeedsBar3+"Package: baz\nVersion: 1\nArchitecture: amd64\nDepends: libc6 (>= 2.40)\n\n")}
	r := mustCheck(t, s)
	if got := brokenIDs(r); !slices.Equal(got, []string{"baz 1 (amd64) on amd64"}) {
		t.Fatalf("broken %q", got)
	}
	if want := "libc6 is 2.36-9 (amd64)"; !strings.Contains(r.Broken[0].Reasons[0], want) {
		t.Fatalf("reason %q does not say %q", r.Broken[0].Reasons[0], want)
	}
	if len(r.External) != 0 {
		t.Fatalf("external names with a base: %v", r.External)
	}
}

func TestCheckChange(t *testing.T) {
	brokenOld := "Package: old\nVersion: 1\nArchitecture: amd64\nDepends: gone (>= 9)\n\nPackage: gone\nVersion: 1\nArchitecture: amd64\n\n"
	for _, c := range []struct {
		name, parent, release string
		broken                []string
		checked               int
	}{
		{"an added package is checked alone", brokenOld + libbar3, brokenOld + libbar3 + fooNeedsBar3, nil, 1},
		{"an added package that cannot be installed", brokenOld + libbar29, brokenOld + libbar29 + fooNeedsBar3, []string{"foo 2.0 (amd64) on amd64"}, 1},
		{"removing what others depend on checks them", libbar3 + fooNeedsBar3, fooNeedsBar3, []string{"foo 2.0 (amd64) on amd64"}, 1},
		{"an upgrade that breaks a dependent", libbar3 + fooNeedsBar3, libbar29 + fooNeedsBar3, []string{"foo 2.0 (amd64) on amd64"}, 2},
		{"breakage the parent had is told apart", brokenOld + libbar3 + "Package: x\nVersion: 1\nArchitecture: amd64\nDepends: old\n\n", brokenOld + libbar3,
			nil, 0},
		{"removing a dependency of a broken package", brokenOld + "Package: y\nVersion: 1\nArchitecture: amd64\n\n", "Package: old\nVersion: 1\nArchitecture: amd64\nDepends: gone (>= 9), y\n\nPackage: gone\nVersion: 1\nArchitecture: amd64\n\n",
			[]string{"old 1 (amd64) on amd64 (existing)"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Suite{Codename: "stable", Architectures: []string{"amd64"}, Release: pkgsOf(t, c.release), Parent: pkgsOf(t, c.parent)}
			r := mustCheck(t, s)
			if got := brokenIDs(r); !slices.Equal(got, c.broken) || r.Checked != c.checked {
				t.Fatalf("broken %q after %d checks, want %q after %d", got, r.Checked, c.broken, c.checked)
			}
		})
	}
}

func mustCheck(t *testing.T, s *Suite) *Report {
	t.Helper()
	r, err := Check(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
