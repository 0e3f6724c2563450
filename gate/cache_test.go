package gate

import (
	"reflect"
	"testing"
)

func TestPackageCache(t *testing.T) {
	pkgs, err := ReadPackages([]byte(synthRepo(500, 3)+"Package: e\nVersion: 1:2.0~rc1-1\nArchitecture: all\nEssential: yes\nMulti-Arch: foreign\nPre-Depends: a:any (>= 1) | b:native\nBreaks: c (<< 2)\nProvides: v (= 1.0), w\n\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		pkgs[i].SHA256 = string(rune('a'+i%26)) + pkgs[i].Name
		ptrs[i] = &pkgs[i]
	}
	got, err := DecodePackages(EncodePackages(ptrs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pkgs) {
		t.Fatalf("%d packages back of %d", len(got), len(pkgs))
	}
	for _, want := range ptrs {
		p := got[want.SHA256]
		p.depFields()
		if p.Name != want.Name || p.Version != want.Version || p.Architecture != want.Architecture || p.MultiArch != want.MultiArch || p.Essential != want.Essential ||
			!reflect.DeepEqual(p.PreDepends, want.PreDepends) || !reflect.DeepEqual(p.Depends, want.Depends) ||
			!reflect.DeepEqual(p.Conflicts, want.Conflicts) || !reflect.DeepEqual(p.Breaks, want.Breaks) || !reflect.DeepEqual(p.Provides, want.Provides) {
			t.Fatalf("%s came back as %+v, want %+v", want.Name, p, want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("armor gate packages 1\n\x05ab"), []byte("other\n")} {
		if _, err := DecodePackages(bad); err == nil {
			t.Errorf("DecodePackages(%q) accepted it", bad)
		}
	}
}

func FuzzDecodePackages(f *testing.F) {
	pkgs, _ := ReadPackages([]byte(synthRepo(5, 1)), "test")
	ptrs := []*Package{&pkgs[0], &pkgs[4]}
	f.Add(EncodePackages(ptrs))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodePackages(data)
		if err != nil {
			return
		}
		for _, p := range got {
			p.depFields()
			p.parsedVersion()
		}
	})
}
