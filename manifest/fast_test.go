package manifest

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func bigManifest(n int) *Manifest {
	m := &Manifest{Schema: SchemaVersion, Repository: "big", Date: "2026-11-22T00:00:00Z", Parent: sum('f')}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pkg%06d", i)
		arch := "amd64"
		if i%10 == 0 {
			arch = "all"
		}
		m.Packages = append(m.Packages, Package{"stable", "main", name, "1:1.0~rc1+b2-1", arch,
			"pool/main/p/" + name + "/" + name + "_1.0~rc1+b2-1_" + arch + ".deb", int64(4000 + i), sum('a')})
	}
	m.Files = append(m.Files, File{"dists/stable/InRelease", 1, sum('b')}, File{"dists/stable/Release", 0, sum('c')})
	if err := Seal(m); err != nil {
		panic(err)
	}
	return m
}

// The fast encoder must write exactly what go-toml writes.
func TestCanonicalEqualsGoTOML(t *testing.T) {
	for name, m := range map[string]*Manifest{
		"sample": sample(), "big": bigManifest(500),
		"empty":      {Schema: 1, Repository: "e", Date: "d"},
		"files only": {Schema: 1, Repository: "e", Files: []File{{"a", 1, sum('a')}}},
	} {
		t.Run(name, func(t *testing.T) {
			fast, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := marshalTOML(m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fast, slow) {
				t.Fatalf("fast encoding differs from go-toml:\n%s\n---\n%s", fast, slow)
			}
			if _, ok := parseCanonical(fast); !ok {
				t.Fatal("the fast decoder rejects the canonical encoding")
			}
		})
	}
}

func TestNonPlainStringsUseGoTOML(t *testing.T) {
	m := sample()
	m.Repository = "it's"
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parseCanonical(data); ok {
		t.Fatal("fast path accepted a non-plain string")
	}
	var back Manifest
	if err := toml.Unmarshal(data, &back); err != nil || back.Repository != "it's" {
		t.Fatalf("go-toml round trip: %v %q", err, back.Repository)
	}
}

// Whatever the fast decoder accepts, go-toml's strict decoder decodes the same.
func FuzzParseCanonical(f *testing.F) {
	good, _ := Marshal(sample())
	f.Add(good)
	f.Add([]byte("schema = 1\nrepository = 'x'\n[[file]]\npath = 'a'\nsize = 01\n"))
	f.Add([]byte("[[package]]\nname = 'a'\n[[package]]\nname = 'b'\n"))
	f.Add([]byte(strings.Replace(string(good), "schema = 1", "schema = 1\nschema = 2", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := parseCanonical(data)
		if !ok {
			return
		}
		var slow Manifest
		dec := toml.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&slow); err != nil {
			t.Fatalf("fast path accepted what go-toml rejects (%v):\n%q", err, data)
		}
		if len(slow.Packages) == 0 {
			slow.Packages = nil
		}
		if len(slow.Files) == 0 {
			slow.Files = nil
		}
		if !reflect.DeepEqual(*fast, slow) {
			t.Fatalf("decoders disagree:\nfast %+v\nslow %+v", *fast, slow)
		}
	})
}

func BenchmarkMarshal100k(b *testing.B) {
	m := bigManifest(100000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse100k(b *testing.B) {
	data, _ := Marshal(bigManifest(100000))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(data, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
