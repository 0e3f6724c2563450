package gate

import (
	"context"
	"strings"
	"testing"
)

func universeOf(t *testing.T, packages string) *Universe {
	t.Helper()
	pkgs, err := ReadPackages([]byte(packages), "test")
	if err != nil {
		t.Fatal(err)
	}
	return NewUniverse(pkgs, "amd64")
}

func TestExplain(t *testing.T) {
	for _, c := range []struct {
		name, packages, pkg string
		want                []string
	}{
		{"a version the repository lacks", `Package: foo
Version: 2.0
Architecture: amd64
Depends: libbar (>= 3)

Package: libbar
Version: 2.9
Architecture: amd64
`, "foo", []string{"foo 2.0 (amd64): Depends: libbar (>= 3): libbar is 2.9 (amd64), none of them for amd64 in that version"}},
		{"down a chain", `Package: app
Version: 1
Architecture: all
Depends: lib | lib-virtual

Package: lib
Version: 1
Architecture: amd64
Depends: missing
`, "app", []string{"app 1 (all): Depends: lib | lib-virtual: every package that meets it cannot be installed:", "  lib 1 (amd64): Depends: missing: nothing has or provides missing"}},
		{"a conflict", `Package: app
Version: 1
Architecture: amd64
Depends: a, b

Package: a
Version: 1
Architecture: amd64

Package: b
Version: 1
Architecture: amd64
Depends: c

Package: c
Version: 1
Architecture: amd64
Breaks: a
`, "app", []string{"app 1 (amd64) → b 1 (amd64): Depends: c: every package that meets it cannot be installed with another that app 1 (amd64) needs:", "  c 1 (amd64) conflicts with a 1 (amd64) (needed as app 1 (amd64) → a 1 (amd64))"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := universeOf(t, c.packages)
			id := u.Lookup(c.pkg)[0]
			if ok, err := NewChecker(u).Installable(context.Background(), id); err != nil || ok {
				t.Fatalf("%s is installable", c.pkg)
			}
			if got := u.Explain(id); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("Explain:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
