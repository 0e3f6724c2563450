package gen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
)

// TestClaimsOfRuns: claims made in runs on all cores are those of one pass over the
// groups in configuration order, and the error is the first file's in that order.
func TestClaimsOfRuns(t *testing.T) {
	var all []*inputs.Input
	for i := range 30_000 {
		arch := []string{"amd64", "all", "arm64"}[i%3]
		name := fmt.Sprintf("p%05d", i)
		all = append(all, &inputs.Input{Path: fmt.Sprintf("/in/%s_1_%s.deb", name, arch), Name: name, Version: "1",
			Architecture: arch, Source: name, SHA256: fmt.Sprintf("%064x", i)})
	}
	files := func(ins []*inputs.Input) []inputs.File {
		var out []inputs.File
		for _, in := range ins {
			out = append(out, inputs.File{Path: in.Path})
		}
		return out
	}
	stable := Suite{Codename: "stable", Architectures: []string{"amd64", "arm64"}}
	// Two groups sharing inputs, each of several runs; the second starts mid-list.
	groups := []inputGroup{
		{suite: stable, comp: "main", files: files(all[:20_000])},
		{suite: Suite{Codename: "testing", Architectures: []string{"amd64", "arm64"}}, comp: "contrib", files: files(all[9_000:])},
	}
	ins := &inputSet{all: all}
	claims, paths, err := claimsOf(groups, ins)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]*inputs.Input{}
	for _, in := range all {
		byPath[in.Path] = in
	}
	var want []claim
	for _, g := range groups {
		for _, f := range g.files {
			in := byPath[f.Path]
			want = append(want, claim{in: in, order: len(want)})
			if claims[len(want)-1].pkg.Suite != g.suite.Codename || claims[len(want)-1].pkg.Component != g.comp {
				t.Fatalf("claim %d is in %s/%s, want %s/%s", len(want)-1, claims[len(want)-1].pkg.Suite, claims[len(want)-1].pkg.Component, g.suite.Codename, g.comp)
			}
		}
	}
	if len(claims) != len(want) || len(paths) != len(want) {
		t.Fatalf("%d claims, %d paths; want %d", len(claims), len(paths), len(want))
	}
	for i, c := range claims {
		if c.in != want[i].in || c.order != i || c.pkg.Name != c.in.Name || c.pkg.Path != poolPath(c.pkg.Component, c.in) {
			t.Fatalf("claim %d: %+v, want the claim of %s", i, c, want[i].in.Path)
		}
		if p := paths[i]; p.path != c.pkg.Path || p.sha256 != c.pkg.SHA256 || p.in != c.in {
			t.Fatalf("paths[%d] %+v does not match claim %+v", i, p, c)
		}
	}

	// i386 is in no suite: the first such file in configuration order is named, though
	// later runs fail too.
	for _, at := range []int{25_000, 12_345, 19_999} {
		all[at].Architecture = "i386"
	}
	_, _, err = claimsOf(groups, ins)
	if err == nil || !strings.HasPrefix(err.Error(), all[12_345].Path+": field Architecture") {
		t.Fatalf("claimsOf: %v, want %s named", err, all[12_345].Path)
	}
}

// TestGrouper: lists grouped through the recent keys are those a plain map makes, for
// runs of a few keys and for keys that change every time.
func TestGrouper(t *testing.T) {
	pkgs := make([]manifest.Package, 5_000)
	r := rand.New(rand.NewPCG(4, 4))
	var g grouper[indexKey]
	want := map[indexKey][]*manifest.Package{}
	for i := range pkgs {
		n := 3 // runs of a few keys
		if i > 3_000 {
			n = 9 // more keys than it remembers
		}
		k := indexKey{"s", fmt.Sprint("c", i/1000), fmt.Sprint("a", r.IntN(n))}
		g.add(k, &pkgs[i])
		want[k] = append(want[k], &pkgs[i])
	}
	got := g.groups()
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("group %v: %d packages, want %d in order", k, len(got[k]), len(w))
		}
	}
}
