package manifest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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
		m.Packages = append(m.Packages, Package{Suite: "stable", Component: "main", Name: name, Version: "1:1.0~rc1+b2-1", Architecture: arch,
			Path: "pool/main/p/" + name + "/" + name + "_1.0~rc1+b2-1_" + arch + ".deb", Size: int64(4000 + i), SHA256: sum('a')})
		if i%7 == 0 {
			// A source package, with its further files.
			d := "pool/main/p/" + name + "/" + name + "_1.0~rc1+b2"
			m.Packages = append(m.Packages, Package{Suite: "stable", Component: "main", Name: name, Version: "1:1.0~rc1+b2-1", Architecture: "source",
				Path: d + "-1.dsc", Size: int64(900 + i), SHA256: sum('d'),
				Files: []File{{d + ".orig.tar.gz", 12345, sum('e')}, {d + "-1.debian.tar.xz", 2000, sum('f')}}})
		}
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
		"phased":     phasedSample(),
		"requested":  requestedSample(),
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

// An optional key written with an empty value (phased, requested_date) is not what
// appendCanonical writes, which omits it: the fast decoder leaves it to go-toml, or Parse
// would check the id against an encoding that is not the canonical one.
func TestEmptyOptionalKeysAreNotCanonical(t *testing.T) {
	good, _ := Marshal(sample())
	for _, edit := range [][2]string{
		{"sha256 = '" + sum('a') + "'\n", "sha256 = '" + sum('a') + "'\nphased = ''\n"},
		{"date = '2026-11-22T00:00:00Z'\n", "date = '2026-11-22T00:00:00Z'\nrequested_date = ''\n"},
	} {
		data := strings.Replace(string(good), edit[0], edit[1], 1)
		if data == string(good) {
			t.Fatalf("edit %q did not apply", edit[0])
		}
		if _, ok := parseCanonical([]byte(data)); ok {
			t.Errorf("the fast decoder accepted %q", edit[1])
		}
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
	withSource := sample()
	withSource.Packages = append(withSource.Packages, Package{Suite: "stable", Component: "main", Name: "hello", Version: "2.10-3",
		Architecture: "source", Path: "pool/main/h/hello/hello_2.10-3.dsc", Size: 9, SHA256: sum('9'),
		Files: []File{{"pool/main/h/hello/hello_2.10.orig.tar.gz", 8, sum('8')}}})
	src, _ := Marshal(withSource)
	f.Add(src)
	requested, _ := Marshal(requestedSample())
	f.Add(requested)
	f.Add([]byte(strings.Replace(string(good), "\n[[package]]", "\nrequested_date = ''\n[[package]]", 1)))
	f.Add([]byte(strings.Replace(string(good), "'\n\n[[package]]", "'\nphased = ''\n\n[[package]]", 2)))
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
		// What the fast decoder accepts is exactly the canonical encoding, which is what
		// lets Parse check the id by hashing its input.
		again, idAt, ok := appendCanonical(nil, fast, fast.ID)
		if !ok || !bytes.Equal(again, data) {
			t.Fatalf("the fast decoder accepted a non-canonical encoding:\n%q\nwhich encodes as\n%q", data, again)
		}
		requested := 0
		if fast.RequestedDate != "" {
			requested = len(lRequested) + len(fast.RequestedDate)
		}
		if _, top, _, _ := parseTop(string(data)); top == nil || idAt != top.pos-len(lParent)-len(fast.Parent)-len(lDate)-len(fast.Date)-requested-len(lEnd)-len(fast.ID) {
			t.Fatalf("parseTop and appendCanonical disagree on where the id is")
		}
	})
}

// parseSlow is Parse through go-toml only.
func parseSlow(data []byte, name string) (*Manifest, error) { return parseTOML(data, name) }

// On canonical input, valid or not, Parse's fast path gives what go-toml's does.
func TestParseFastEqualsSlow(t *testing.T) {
	good, err := Marshal(realManifest(5000))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parseCanonical(good)
	id, parent := m.ID, m.Parent
	edits := []struct {
		name, from, to string
		wantErr        bool
	}{
		{"valid", "", "", false},
		{"tampered size", "\nsize = 1", "\nsize = 2", true},
		{"tampered name", "name = 'lib", "name = 'lob", true},
		{"tampered id", "id = '" + id, "id = '0" + id[1:], true},
		{"short id", "id = '" + id, "id = '" + id[1:], true},
		{"bad digest", "sha256 = '", "sha256 = 'x", true},
		{"traversal", "path = 'pool/", "path = 'pool/../", true},
		{"schema", "schema = 1\n", "schema = 2\n", true},
		{"no parent", "parent = '" + parent, "parent = '", true},
		{"short parent", "parent = '" + parent, "parent = '" + parent[1:], true},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			data := []byte(strings.Replace(string(good), e.from, e.to, 1))
			if e.from != "" && bytes.Equal(data, good) {
				t.Fatal("the edit did not apply")
			}
			if _, ok := parseCanonical(data); !ok {
				t.Fatal("the fast decoder rejects the input")
			}
			fast, errFast := Parse(data, "m.toml")
			slow, errSlow := parseSlow(data, "m.toml")
			if fmt.Sprint(errFast) != fmt.Sprint(errSlow) {
				t.Fatalf("fast: %v\nslow: %v", errFast, errSlow)
			}
			if errFast == nil && !reflect.DeepEqual(fast, slow) {
				t.Fatal("the decoders disagree")
			}
			if (errFast != nil) != e.wantErr {
				t.Fatalf("error %v, want one: %v", errFast, e.wantErr)
			}
		})
	}
}

// SealMarshal is Seal then Marshal, on the fast path (hashing beside the encoding or
// not) and on go-toml's.
func TestSealMarshal(t *testing.T) {
	shuffled := realManifest(300)
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(shuffled.Packages), func(i, j int) {
		shuffled.Packages[i], shuffled.Packages[j] = shuffled.Packages[j], shuffled.Packages[i]
	})
	quoteRepo := sample()
	quoteRepo.Repository = "it's"
	quoteLate := realManifest(6000)
	quoteLate.Files[len(quoteLate.Files)-1].Path = "dists/x\\y"
	quoteMid := realManifest(6000) // hashed on a second goroutine, which must still end
	quoteMid.Packages[3000].Version = "1.0'1"
	staleID := sample()
	staleID.ID = "not 'an' id"
	tests := []struct {
		name string
		m    *Manifest
		fast bool
	}{
		{"sample", sample(), true},
		{"large", realManifest(6000), true},
		{"unsorted", shuffled, true},
		{"empty", &Manifest{Schema: 1, Repository: "e", Date: "d"}, true},
		{"stale id", staleID, true},
		{"quote in repository", quoteRepo, false},
		{"backslash in the last file", quoteLate, false},
		{"quote in a package of a large manifest", quoteMid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := clone(tt.m), clone(tt.m)
			got, err := SealMarshal(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := Seal(b); err != nil {
				t.Fatal(err)
			}
			want, err := Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("SealMarshal:\n%.2000s\nSeal, Marshal:\n%.2000s", got, want)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("SealMarshal left %+v, Seal %+v", a.ID, b.ID)
			}
			if _, ok := parseCanonical(got); ok != tt.fast {
				t.Fatalf("fast path: %v, want %v", ok, tt.fast)
			}
			if len(tt.m.Packages) > 0 && tt.m.Validate() == nil || tt.name == "sample" {
				if _, err := Parse(got, "m.toml"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A Sealer started on a manifest without its files, while the caller goes on making them,
// gives what SealMarshal gives the whole manifest; files with a path outside the plain
// subset take the slow path there too.
func TestSealerInTwoSteps(t *testing.T) {
	for _, n := range []int{3, 6000} { // 6000: the hash runs on its own goroutine
		for _, odd := range []bool{false, true} {
			whole := realManifest(n)
			if odd {
				whole.Files[0].Path = "dists/x\\y"
			}
			want, err := SealMarshal(clone(whole))
			if err != nil {
				t.Fatal(err)
			}
			m := clone(whole)
			files := m.Files
			m.Files = nil
			s := StartSeal(m)
			slices.Reverse(files) // Finish sorts them
			got, err := s.Finish(files)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d packages, odd path %v: two steps give\n%.2000s\nSealMarshal\n%.2000s", n, odd, got, want)
			}
			if err := VerifyID(m); err != nil {
				t.Fatalf("%d packages, odd path %v: %v", n, odd, err)
			}
		}
	}
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

// phasedSample is sample with a phased package, whose encoding has the phased line.
func phasedSample() *Manifest {
	m := sample()
	m.Packages[0].Phased = "10"
	return m
}

// requestedSample is sample dated a second after the date its build asked for, whose
// encoding has the requested_date line.
func requestedSample() *Manifest {
	m := sample()
	m.Date, m.RequestedDate = "2026-11-22T00:00:01Z", "2026-11-22T00:00:00Z"
	if err := Seal(m); err != nil {
		panic(err)
	}
	return m
}
