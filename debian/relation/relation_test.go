package relation

import (
	"reflect"
	"testing"
)

func TestParseDepends(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     [][]Relation
	}{
		{"empty", "  ", nil},
		{"plain", "libc6", [][]Relation{{{Name: "libc6"}}}},
		{"versions", "libc6 (>= 2.36), zlib1g(>>1:1.2)", [][]Relation{
			{{Name: "libc6", Op: GreaterEq, Version: "2.36"}},
			{{Name: "zlib1g", Op: Greater, Version: "1:1.2"}},
		}},
		{"alternatives", "default-mta | mail-transport-agent", [][]Relation{{{Name: "default-mta"}, {Name: "mail-transport-agent"}}}},
		{"qualifiers", "python3:any (>= 3.11~), perl:native, libfoo:i386", [][]Relation{
			{{Name: "python3", Arch: "any", Op: GreaterEq, Version: "3.11~"}},
			{{Name: "perl", Arch: "native"}},
			{{Name: "libfoo", Arch: "i386"}},
		}},
		{"obsolete operators", "a (< 1), b (> 2)", [][]Relation{{{Name: "a", Op: LessEq, Version: "1"}}, {{Name: "b", Op: GreaterEq, Version: "2"}}}},
		{"folded and spaced", "a ( = 1.0-1 ) ,\n b |c ,", [][]Relation{{{Name: "a", Op: Equal, Version: "1.0-1"}}, {{Name: "b"}, {Name: "c"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDepends(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseDepends(%q)\n got %+v\nwant %+v", c.in, got, c.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"a (>= )", "a (~ 1)", "a (>= 1", "a |", "| a", "a:", "Foo", "-a", "a (>= 1) (<< 2)",
		"a [amd64]", "a <!nocheck>", "a b", "a (>= 1 2)", "a (>= 1_2)", "a (>= :1)",
	} {
		if got, err := ParseDepends(in); err == nil {
			t.Errorf("ParseDepends(%q) = %+v, want an error", in, got)
		}
	}
	if got, err := ParseList("a | b"); err == nil {
		t.Errorf("ParseList accepted alternatives: %+v", got)
	}
}

func TestString(t *testing.T) {
	in := "a:any (>= 1:2.0-1), b | c (<< 3)"
	rels, err := ParseDepends(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := Alternatives(rels[0]) + ", " + Alternatives(rels[1]); got != in {
		t.Fatalf("rendered %q, want %q", got, in)
	}
}
