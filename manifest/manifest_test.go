package manifest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func sum(c byte) string { return strings.Repeat(string(c), 64) }

func sample() *Manifest {
	m := &Manifest{
		Schema: SchemaVersion, Repository: "demo", Date: "2026-11-22T00:00:00Z",
		Packages: []Package{
			{Suite: "stable", Component: "main", Name: "hello", Version: "2.10-3", Architecture: "amd64", Path: "pool/main/h/hello/hello_2.10-3_amd64.deb", Size: 10, SHA256: sum('a')},
			{Suite: "stable", Component: "main", Name: "base", Version: "1:1.0-1", Architecture: "all", Path: "pool/main/b/base/base_1.0-1_all.deb", Size: 20, SHA256: sum('b')},
		},
		Files: []File{
			{"dists/stable/Release", 30, sum('c')},
			{"dists/stable/InRelease", 40, sum('d')},
		},
	}
	if err := Seal(m); err != nil {
		panic(err)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	m := sample()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data, "m.toml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	again, _ := Marshal(got)
	if !bytes.Equal(data, again) {
		t.Fatalf("encoding not stable:\n%s\n---\n%s", data, again)
	}
	if got.ID != m.ID || len(got.Packages) != 2 || got.Packages[0].Name != "base" {
		t.Fatalf("decoded %+v", got)
	}
	if !strings.Contains(string(data), "[[package]]\nsuite = 'stable'") {
		t.Fatalf("unexpected layout:\n%s", data)
	}
}

// A requested date is written beside date, read back, and covered by the id.
func TestRequestedDateRoundTrip(t *testing.T) {
	m := requestedSample()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\ndate = '2026-11-22T00:00:01Z'\nrequested_date = '2026-11-22T00:00:00Z'\n") {
		t.Fatalf("no requested_date line after date:\n%s", data)
	}
	got, err := Parse(data, "m.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestedDate != m.RequestedDate || got.ID != m.ID {
		t.Fatalf("decoded requested_date %q id %s, want %q %s", got.RequestedDate, got.ID, m.RequestedDate, m.ID)
	}
	if plain := sample(); plain.ID == m.ID || strings.Contains(string(mustMarshalTest(t, plain)), "requested_date") {
		t.Fatalf("the id does not cover requested_date, or a manifest without it writes it")
	}
	edited := strings.Replace(string(data), "requested_date = '2026-11-22T00:00:00Z'", "requested_date = '2026-11-21T00:00:00Z'", 1)
	if _, err := Parse([]byte(edited), "m.toml"); !errors.Is(err, ErrIDMismatch) {
		t.Fatalf("an edited requested_date: %v, want ErrIDMismatch", err)
	}
}

func mustMarshalTest(t *testing.T, m *Manifest) []byte {
	t.Helper()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseRejects(t *testing.T) {
	good, _ := Marshal(sample())
	tests := []struct {
		name, edit, want string
	}{
		{"unknown key", "schema = 1\n", "schema = 1\nflavour = 'x'\n"},
		{"tampered", "size = 10\n", "size = 11\n"},
		{"bad digest", "sha256 = '" + sum('a') + "'", "sha256 = 'zz'"},
		{"traversal", "pool/main/h/hello/hello_2.10-3_amd64.deb", "pool/../etc/passwd"},
		{"schema", "schema = 1\n", "schema = 9\n"},
		{"requested date not a time", "date = '2026-11-22T00:00:00Z'\n", "date = '2026-11-22T00:00:00Z'\nrequested_date = 'yesterday'\n"},
		{"requested date not before date", "date = '2026-11-22T00:00:00Z'\n", "date = '2026-11-22T00:00:00Z'\nrequested_date = '2026-11-22T00:00:00Z'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.edit, tt.want, 1)
			if bad == string(good) {
				t.Fatalf("edit %q did not apply", tt.edit)
			}
			if _, err := Parse([]byte(bad), "m.toml"); err == nil {
				t.Fatalf("accepted:\n%s", bad)
			} else if !strings.Contains(err.Error(), "m.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
	t.Run("id mismatch is typed", func(t *testing.T) {
		bad := strings.Replace(string(good), "size = 10\n", "size = 12\n", 1)
		_, err := Parse([]byte(bad), "m.toml")
		if !errors.Is(err, ErrIDMismatch) {
			t.Fatalf("want ErrIDMismatch, got %v", err)
		}
	})
	t.Run("unknown key names line", func(t *testing.T) {
		bad := strings.Replace(string(good), "schema = 1\n", "schema = 1\nflavour = 'x'\n", 1)
		_, err := Parse([]byte(bad), "m.toml")
		if err == nil || !strings.Contains(err.Error(), "flavour") {
			t.Fatalf("want error naming flavour, got %v", err)
		}
	})
}

func TestDiff(t *testing.T) {
	old := sample()
	nu := sample()
	nu.Packages[0].Version = "2.10-4" // hello upgraded (after sorting: index 1 is hello)
	for i := range nu.Packages {
		if nu.Packages[i].Name == "hello" {
			nu.Packages[i].Version = "2.10-4"
		}
		if nu.Packages[i].Name == "base" {
			nu.Packages[i].Version = "1:0.9-1"
		}
	}
	nu.Packages = append(nu.Packages, Package{Suite: "stable", Component: "main", Name: "new", Version: "1", Architecture: "amd64", Path: "pool/main/n/new/new_1_amd64.deb", Size: 1, SHA256: sum('e')})
	got := Diff(old, nu)
	want := []Change{
		{"stable", "main", "all", "base", Downgraded, "1:1.0-1", "1:0.9-1"},
		{"stable", "main", "amd64", "hello", Upgraded, "2.10-3", "2.10-4"},
		{"stable", "main", "amd64", "new", Added, "", "1"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	if rm := Diff(nu, nil); len(rm) != 3 || rm[0].Kind != Removed {
		t.Fatalf("diff to nil: %+v", rm)
	}
}

func FuzzParse(f *testing.F) {
	good, _ := Marshal(sample())
	f.Add(good)
	requested, _ := Marshal(requestedSample())
	f.Add(requested)
	f.Add([]byte("schema = 1\n"))
	f.Add([]byte("[[package]]\nname = 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid manifest: %v", err)
		}
		out, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(out, "again"); err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v", err)
		}
	})
}

// A source package's further files are served paths: they are objects of the release,
// and one of them may not give a path other bytes.
func TestSourcePackageFiles(t *testing.T) {
	m := sample()
	dsc := Package{Suite: "stable", Component: "main", Name: "hello", Version: "2.10-3", Architecture: "source",
		Path: "pool/main/h/hello/hello_2.10-3.dsc", Size: 5, SHA256: sum('1'),
		Files: []File{{"pool/main/h/hello/hello_2.10.orig.tar.gz", 6, sum('2')}}}
	m.Packages = append(m.Packages, dsc)
	if err := Seal(m); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\n[[package.file]]\npath = 'pool/main/h/hello/hello_2.10.orig.tar.gz'\n") {
		t.Errorf("encoding lacks the package's file table:\n%s", data)
	}
	got, err := Parse(data, "m")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Paths()["pool/main/h/hello/hello_2.10.orig.tar.gz"]; !ok || o.SHA256 != sum('2') {
		t.Errorf("Paths lacks the orig tarball: %v", o)
	}
	if !slices.Contains(got.Objects(), Object{sum('2'), 6}) {
		t.Errorf("Objects lacks the orig tarball")
	}
	bad := *got
	bad.Packages = slices.Clone(got.Packages)
	i := slices.IndexFunc(bad.Packages, func(p Package) bool { return p.Architecture == "source" })
	bad.Packages[i].Files = []File{{"pool/main/h/hello/hello_2.10-3_amd64.deb", 6, sum('2')}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "two different objects") {
		t.Errorf("Validate of a file shadowing a package's path: %v", err)
	}
	bad.Packages[i].Files = []File{{"dists/x", 6, sum('2')}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "not under pool/") {
		t.Errorf("Validate of a file outside pool/: %v", err)
	}
}

// TestDiffSharedEnds: entries the two lists share at their ends are left out of the
// comparison, and a name whose versions straddle them still compares as a whole.
func TestDiffSharedEnds(t *testing.T) {
	pkg := func(name, version string, s byte) Package {
		return Package{Suite: "stable", Component: "main", Name: name, Version: version, Architecture: "amd64",
			Path: "pool/main/" + name + "_" + version + ".deb", Size: 1, SHA256: sum(s)}
	}
	tests := []struct {
		name     string
		old, new []Package
		want     []Change
	}{
		{"newest version replaced after a shared one",
			[]Package{pkg("x", "1", 'a'), pkg("x", "2", 'b'), pkg("y", "1", 'c')},
			[]Package{pkg("x", "1", 'a'), pkg("x", "3", 'd'), pkg("y", "1", 'c')},
			[]Change{{"stable", "main", "amd64", "x", Upgraded, "2", "3"}}},
		{"oldest version replaced before a shared one",
			[]Package{pkg("x", "1", 'a'), pkg("x", "3", 'b')},
			[]Package{pkg("x", "2", 'c'), pkg("x", "3", 'b')},
			[]Change{{"stable", "main", "amd64", "x", Upgraded, "1", "2"}}},
		{"rebuilt between shared ones",
			[]Package{pkg("w", "1", 'a'), pkg("x", "1", 'b'), pkg("y", "1", 'c')},
			[]Package{pkg("w", "1", 'a'), pkg("x", "1", 'd'), pkg("y", "1", 'c')},
			[]Change{{"stable", "main", "amd64", "x", Rebuilt, "1", "1"}}},
		{"one added in the middle",
			[]Package{pkg("w", "1", 'a'), pkg("y", "1", 'c')},
			[]Package{pkg("w", "1", 'a'), pkg("x", "1", 'b'), pkg("y", "1", 'c')},
			[]Change{{"stable", "main", "amd64", "x", Added, "", "1"}}},
		{"all shared", []Package{pkg("w", "1", 'a')}, []Package{pkg("w", "1", 'a')}, nil},
	}
	for _, tc := range tests {
		got := Diff(&Manifest{Packages: tc.old}, &Manifest{Packages: tc.new})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
