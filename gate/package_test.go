package gate

import (
	"context"
	"strings"
	"testing"
)

// FuzzReadPackages: a Packages index from outside (a base) never panics the reader; what
// it accepts has a name, version and architecture, and every relation a name.
func FuzzReadPackages(f *testing.F) {
	f.Add([]byte(synthRepo(3, 1)))
	f.Add([]byte("Package: a\nVersion: 1:2.0-1\nArchitecture: all\nMulti-Arch: foreign\nDepends: b:any (>= 1) | c,\n d\nProvides: v (= 1)\n\n\nPackage: b\nVersion: 1\nArchitecture: amd64\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pkgs, err := ReadPackages(data, "fuzz")
		if err != nil {
			return
		}
		for _, p := range pkgs {
			if p.Name == "" || p.Version == "" || p.Architecture == "" {
				t.Fatalf("accepted %+v", p)
			}
			for _, field := range p.depFields() {
				for _, alts := range field {
					for _, r := range alts {
						if r.Name == "" || strings.ContainsAny(r.Name, " ,|") {
							t.Fatalf("relation without a proper name in %+v", p)
						}
					}
				}
			}
		}
		u := NewUniverse(pkgs, "amd64", "i386")
		if _, err := NewChecker(u).Broken(context.Background(), u.All()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestReadPackagesErrors(t *testing.T) {
	for _, in := range []string{
		"Package: a\nVersion: 1\n",                                       // no Architecture
		"Package: a\nVersion: 1\nArchitecture: amd64\nDepends: b (>>)\n", // bad relation
		"Package: a\nVersion: 1\nArchitecture: amd64\nMulti-Arch: maybe\n",
		"Package: a\nVersion: 1\nArchitecture: amd64\nProvides: v (>= 1)\n",
	} {
		if _, err := ReadPackages([]byte(in), "test"); err == nil || !strings.Contains(err.Error(), "test, stanza at line 1") {
			t.Errorf("ReadPackages(%q) = %v, want an error naming the file and line", in, err)
		}
	}
}
