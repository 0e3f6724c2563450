package relation

import (
	"reflect"
	"testing"

	"pault.ag/go/debian/dependency"
)

// FuzzParseDepends: the parser never panics; what it accepts renders to text it reads
// back the same, and pault.ag/go/debian/dependency reads the same names, qualifiers and
// constraints from it.
func FuzzParseDepends(f *testing.F) {
	for _, s := range []string{
		"libc6 (>= 2.36), zlib1g (>= 1:1.2)", "a | b:any (<< 1~), c:native", "a (= 1.0-1),\n b", "a,,b,", "x (< 1)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rels, err := ParseDepends(in)
		if err != nil {
			return
		}
		var text string
		for i, alts := range rels {
			if i > 0 {
				text += ", "
			}
			text += Alternatives(alts)
		}
		again, err := ParseDepends(text)
		if err != nil || len(again) != len(rels) {
			t.Fatalf("%q parsed as %+v, rendered %q, which parses as %+v, %v", in, rels, text, again, err)
		}
		theirs, err := dependency.Parse(text)
		if err != nil {
			t.Fatalf("pault.ag refuses %q (from %q): %v", text, in, err)
		}
		if len(theirs.Relations) != len(rels) {
			t.Fatalf("%q: %d relations, pault.ag reads %d", text, len(rels), len(theirs.Relations))
		}
		for i, alts := range rels {
			ps := theirs.Relations[i].Possibilities
			if len(ps) != len(alts) {
				t.Fatalf("%q: relation %d has %d alternatives, pault.ag reads %d", text, i, len(alts), len(ps))
			}
			for j, r := range alts {
				p := ps[j]
				var arch *dependency.Arch
				if r.Arch != "" {
					if arch, err = dependency.ParseArch(r.Arch); err != nil {
						t.Fatalf("pault.ag refuses the architecture %q: %v", r.Arch, err)
					}
				}
				ver, op := "", ""
				if p.Version != nil {
					ver, op = p.Version.Number, p.Version.Operator
				}
				if op == "<" {
					op = "<="
				} else if op == ">" {
					op = ">="
				}
				if p.Name != r.Name || !reflect.DeepEqual(arch, p.Arch) || ver != r.Version || op != r.Op.String() || again[i][j] != r {
					t.Fatalf("%q: %+v, pault.ag reads %+v (op %q, version %q)", text, r, p, op, ver)
				}
			}
		}
	})
}
