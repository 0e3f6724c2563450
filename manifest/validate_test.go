package manifest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The fast checks below must decide exactly as the simple ones they replaced, which are
// kept here as the reference.

func validPathReference(p string) bool {
	if p == "" {
		return false
	}
	segStart := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			if p[i] == '\\' || p[i] == 0 {
				return false
			}
			continue
		}
		seg := p[segStart:i]
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		segStart = i + 1
	}
	return true
}

func validDigestReference(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func plainStringReference(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\'' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func plainPrefixReference(s string) int {
	for i := 0; i < len(s); i++ {
		if !plainStringReference(s[i : i+1]) {
			return i
		}
	}
	return len(s)
}

// validateReference is Validate as it was before it was made fast: one pass in entry
// order, a map of paths.
func validateReference(m *Manifest) error {
	if m.Schema != SchemaVersion {
		return fmt.Errorf("schema %d is not supported (this armor reads schema %d)", m.Schema, SchemaVersion)
	}
	if m.Repository == "" {
		return fmt.Errorf("repository is empty")
	}
	if m.Parent != "" && !validDigestReference(m.Parent) {
		return fmt.Errorf("parent %q is not a sha256 release id", m.Parent)
	}
	paths := map[string]Object{}
	claim := func(what string, p string, o Object) error {
		if !validPathReference(p) {
			return fmt.Errorf("%s: path %q is not a clean relative path", what, p)
		}
		if !validDigestReference(o.SHA256) {
			return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", what, o.SHA256)
		}
		if o.Size < 0 {
			return fmt.Errorf("%s: negative size %d", what, o.Size)
		}
		if prev, ok := paths[p]; ok && prev != o {
			return fmt.Errorf("%s: path %s is listed as two different objects", what, p)
		}
		paths[p] = o
		return nil
	}
	for i, p := range m.Packages {
		what := fmt.Sprintf("package %d (%s %s %s in %s/%s)", i+1, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		if p.Suite == "" || p.Component == "" || p.Name == "" || p.Version == "" || p.Architecture == "" {
			return fmt.Errorf("%s: suite, component, name, version and architecture are required", what)
		}
		if i > 0 && m.Packages[i-1].Key() == p.Key() {
			return fmt.Errorf("%s: listed twice", what)
		}
		if !strings.HasPrefix(p.Path, "pool/") {
			return fmt.Errorf("%s: path %q is not under pool/", what, p.Path)
		}
		if err := claim(what, p.Path, Object{p.SHA256, p.Size}); err != nil {
			return err
		}
		if prev := m.Packages[max(i-1, 0)]; i > 0 && cmp.Or(
			strings.Compare(prev.Suite, p.Suite),
			strings.Compare(prev.Component, p.Component),
			strings.Compare(prev.Name, p.Name),
			strings.Compare(prev.Version, p.Version),
			strings.Compare(prev.Architecture, p.Architecture),
			strings.Compare(prev.Path, p.Path),
		) > 0 {
			return fmt.Errorf("%s: packages are not in canonical order", what)
		}
	}
	for i, f := range m.Files {
		what := fmt.Sprintf("file %d (%s)", i+1, f.Path)
		if err := claim(what, f.Path, Object{f.SHA256, f.Size}); err != nil {
			return err
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("%s: files are not sorted by path, or listed twice", what)
		}
	}
	return nil
}

// byteStrings returns strings of every length up to 20 with every byte value at every
// position, the rest of the string being filler.
func byteStrings(filler byte) []string {
	var out []string
	for n := 1; n <= 20; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat(string(filler), n))
				b[pos] = byte(c)
				out = append(out, string(b))
			}
		}
	}
	return out
}

func TestPlainMatchesReference(t *testing.T) {
	cases := byteStrings('a')
	// Several bytes out of the plain set in one word, where borrows and carries cross.
	r := rand.New(rand.NewPCG(4, 4))
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '\'', '\\', 0x5b, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff, 'a'}
	for range 100000 {
		b := make([]byte, r.IntN(25))
		for i := range b {
			b[i] = edges[r.IntN(len(edges))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := plainString(s), plainStringReference(s); got != want {
			t.Fatalf("plainString(%q) = %v, want %v", s, got, want)
		}
		if got, want := plainPrefix(s), plainPrefixReference(s); got != want {
			t.Fatalf("plainPrefix(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestValidDigestMatchesReference(t *testing.T) {
	for _, filler := range []byte{'0', '9', 'a', 'f'} {
		for pos := 0; pos < 64; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat(string(filler), 64))
				b[pos] = byte(c)
				if got, want := ValidDigest(string(b)), validDigestReference(string(b)); got != want {
					t.Fatalf("ValidDigest(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
	for _, s := range []string{"", sum('a')[:63], sum('a') + "a", strings.ToUpper(sum('a'))} {
		if ValidDigest(s) {
			t.Errorf("ValidDigest(%q) is true", s)
		}
	}
}

func TestValidPathMatchesReference(t *testing.T) {
	cases := []string{"", "/", "a", ".", "..", "...", ".a", "a.", "a/.", "a/..", "a/...", "./a", "../a",
		"a//b", "a/b/", "/a", "a/b", "a/./b", "a/../b", "a/.../b", "a\\b", "a\x00b", "pool/main/h/hello.deb"}
	for _, s := range byteStrings('a') {
		cases = append(cases, s, "x/"+s, s+"/x", "x/"+s+"/x")
	}
	for _, s := range byteStrings('.') {
		cases = append(cases, s, "x/"+s)
	}
	for _, s := range cases {
		if got, want := ValidPath(s), validPathReference(s); got != want {
			t.Fatalf("ValidPath(%q) = %v, want %v", s, got, want)
		}
	}
}

// mutations break a manifest in the ways Validate must notice, at entry i.
var mutations = []struct {
	name string
	do   func(m *Manifest, r *rand.Rand, i int)
}{
	{"empty name", func(m *Manifest, r *rand.Rand, i int) { pkg(m, i).Name = "" }},
	{"package twice", func(m *Manifest, r *rand.Rand, i int) {
		if i > 0 && i < len(m.Packages) {
			m.Packages[i] = m.Packages[i-1]
		}
	}},
	{"same key, other file", func(m *Manifest, r *rand.Rand, i int) {
		if i > 0 && i < len(m.Packages) {
			p := m.Packages[i-1]
			p.Path += ".x"
			m.Packages[i] = p
		}
	}},
	{"not under pool", func(m *Manifest, r *rand.Rand, i int) { pkg(m, i).Path = "dists/x.deb" }},
	{"bad path", func(m *Manifest, r *rand.Rand, i int) { *path(m, i) += "/../x" }},
	{"bad digest", func(m *Manifest, r *rand.Rand, i int) { *digest(m, i) = strings.ToUpper(*digest(m, i)) }},
	{"short digest", func(m *Manifest, r *rand.Rand, i int) { *digest(m, i) = (*digest(m, i))[1:] }},
	{"negative size", func(m *Manifest, r *rand.Rand, i int) { *size(m, i) = -1 }},
	{"same path, other digest", func(m *Manifest, r *rand.Rand, i int) {
		j := r.IntN(len(m.Packages) + len(m.Files))
		*path(m, i) = *path(m, j)
		*digest(m, i) = sum('e')
	}},
	{"same path, same object", func(m *Manifest, r *rand.Rand, i int) {
		j := r.IntN(len(m.Packages) + len(m.Files))
		*path(m, i), *digest(m, i), *size(m, i) = *path(m, j), *digest(m, j), *size(m, j)
	}},
	{"same path, other size", func(m *Manifest, r *rand.Rand, i int) {
		j := r.IntN(len(m.Packages) + len(m.Files))
		*path(m, i), *digest(m, i), *size(m, i) = *path(m, j), *digest(m, j), *size(m, j)+1
	}},
	{"out of order", func(m *Manifest, r *rand.Rand, i int) {
		if i > 0 && i < len(m.Packages) {
			m.Packages[i-1], m.Packages[i] = m.Packages[i], m.Packages[i-1]
		} else if f := i - len(m.Packages); f > 0 {
			m.Files[f-1], m.Files[f] = m.Files[f], m.Files[f-1]
		}
	}},
	{"file twice", func(m *Manifest, r *rand.Rand, i int) {
		if f := i - len(m.Packages); f > 0 {
			m.Files[f] = m.Files[f-1]
		}
	}},
}

func pkg(m *Manifest, e int) *Package {
	if e < len(m.Packages) {
		return &m.Packages[e]
	}
	return &Package{}
}

func path(m *Manifest, e int) *string {
	if e < len(m.Packages) {
		return &m.Packages[e].Path
	}
	return &m.Files[e-len(m.Packages)].Path
}

func digest(m *Manifest, e int) *string {
	if e < len(m.Packages) {
		return &m.Packages[e].SHA256
	}
	return &m.Files[e-len(m.Packages)].SHA256
}

func size(m *Manifest, e int) *int64 {
	if e < len(m.Packages) {
		return &m.Packages[e].Size
	}
	return &m.Files[e-len(m.Packages)].Size
}

func clone(m *Manifest) *Manifest {
	c := *m
	c.Packages = slices.Clone(m.Packages)
	c.Files = slices.Clone(m.Files)
	return &c
}

// resultKinds are the results TestValidateMatchesReference should reach.
var resultKinds = []string{"<nil>", "required", "listed twice", "not under pool/", "not a clean relative path",
	"not 64 lowercase", "negative size", "two different objects", "not in canonical order", "not sorted by path"}

// Validate reports the same error as the reference on manifests broken in one to three
// places, small ones and ones large enough to be checked on several cores.
func TestValidateMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		rounds int
	}{
		{"small", 40, 3000},
		{"medium", 400, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := realManifest(tc.size)
			if err := base.Validate(); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, uint64(tc.size)))
			kinds := map[string]int{}
			for round := 0; round < tc.rounds; round++ {
				m := clone(base)
				var did []string
				for range 1 + r.IntN(3) {
					mu := mutations[r.IntN(len(mutations))]
					// Entries near the ends and near the middle, where the parts of a
					// parallel check meet, as well as anywhere.
					n := len(m.Packages) + len(m.Files)
					e := []int{r.IntN(n), r.IntN(3), n/2 - 1 + r.IntN(3), len(m.Packages) - 1 + r.IntN(3), n - 1 - r.IntN(2)}[r.IntN(5)]
					mu.do(m, r, e)
					did = append(did, fmt.Sprintf("%s at %d", mu.name, e))
				}
				want := fmt.Sprint(validateReference(m))
				if got := fmt.Sprint(m.Validate()); got != want {
					t.Fatalf("after %v:\nValidate:  %s\nreference: %s", did, got, want)
				}
				// The parts of a check on several cores.
				for _, parts := range []int{2, 3, 7} {
					if got := fmt.Sprint(m.checkAll(parts)); got != want {
						t.Fatalf("after %v:\nin %d parts: %s\nreference: %s", did, parts, got, want)
					}
				}
				for _, k := range resultKinds {
					if strings.Contains(want, k) {
						kinds[k]++
					}
				}
			}
			if len(kinds) < len(resultKinds) {
				t.Fatalf("the mutations reached only %d kinds of result: %v", len(kinds), kinds)
			}
		})
	}
}

// Sort leaves a sorted manifest as it is and sorts any other as slices.SortFunc does.
func TestSort(t *testing.T) {
	want := realManifest(3000)
	got := clone(want)
	r := rand.New(rand.NewPCG(2, 2))
	r.Shuffle(len(got.Packages), func(i, j int) { got.Packages[i], got.Packages[j] = got.Packages[j], got.Packages[i] })
	r.Shuffle(len(got.Files), func(i, j int) { got.Files[i], got.Files[j] = got.Files[j], got.Files[i] })
	got.Sort()
	if !EqualPackages(got.Packages, want.Packages) || !slices.Equal(got.Files, want.Files) {
		t.Fatal("Sort did not restore the canonical order")
	}
	if !packagesSorted(want.Packages) || packagesSorted([]Package{want.Packages[1], want.Packages[0]}) {
		t.Fatal("packagesSorted is wrong")
	}
}
