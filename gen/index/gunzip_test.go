package index

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// gunzippedParent builds an index of 1,500 synthetic stanzas (seeded with seed) and
// returns them, the index, and its plain bytes and members as Gunzip reads them back.
func gunzippedParent(t *testing.T, seed uint64) ([][]byte, *Files, []byte, []GzipMember) {
	t.Helper()
	base := synthStanzas(1500, seed)
	parent, err := Build(base, nil, testName)
	if err != nil {
		t.Fatal(err)
	}
	plain, members, err := Gunzip(parent.Gzip, len(parent.Plain))
	if err != nil {
		t.Fatal(err)
	}
	return base, parent, plain, members
}

// TestSeedPublished is the fresh runner's path: the plain index is made from the fetched
// .gz by Gunzip, and its members seed the cache without being decoded again, as fully as
// Seed does; a member that Build would not have written is still refused.
func TestSeedPublished(t *testing.T) {
	base, parent, plain, members := gunzippedParent(t, 64)
	sameBytes(t, "gunzipped", plain, parent.Plain)
	c := openCache(t, t.TempDir())
	st, err := c.SeedPublished(testName, Published{Plain: plain, Gzip: parent.Gzip, Xz: parent.Xz, GzipMembers: members})
	if err != nil {
		t.Fatal(err)
	}
	checkSeedStats(t, st)
	if st.Chunks < 3 || len(members) != st.Chunks || st.Gzip.Seeded != st.Chunks || st.XZ.Seeded != st.Chunks {
		t.Fatalf("seed stats %+v from %d members: want every chunk of both forms seeded", st, len(members))
	}
	got, err := Build(base, c, testName)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, got, parent)
	if s := c.Stats(); s.Misses != 0 {
		t.Errorf("build stats %+v: want no compression", s)
	}

	// A member whose deflate data does not end as Build's does (a padding bit set) still
	// decodes, but is not Build's: it and the members after it are not taken.
	gz := bytes.Clone(parent.Gzip)
	m := members[1]
	gz[m.Off+m.Size-9] |= 0x80
	plain, members, err = Gunzip(gz, 0)
	if err != nil {
		t.Fatalf("a padding bit broke decoding: %v", err)
	}
	st, err = openCache(t, t.TempDir()).SeedPublished(testName, Published{Plain: plain, Gzip: gz, Xz: parent.Xz, GzipMembers: members})
	if err != nil {
		t.Fatal(err)
	}
	checkSeedStats(t, st)
	if st.Gzip.Seeded != 1 || st.Gzip.Why == nil || st.XZ.Seeded != st.Chunks {
		t.Errorf("seed stats %+v with the second member's padding damaged: want the first member only", st)
	}
	// Members that do not tile the plain index are not taken.
	shifted := append([]GzipMember(nil), members...)
	shifted[0].PlainSize--
	st, err = openCache(t, t.TempDir()).SeedPublished(testName, Published{Plain: plain, Gzip: gz, Xz: parent.Xz, GzipMembers: shifted})
	if err != nil {
		t.Fatal(err)
	}
	if st.Gzip.Seeded != 0 || st.Gzip.Why == nil {
		t.Errorf("seed stats %+v with members that do not tile the index: want none taken", st)
	}
}

// TestSeedSigned: the LZMA2 data of a signed release's Packages.xz is not decoded; Seed's
// checks of its framing still apply.
func TestSeedSigned(t *testing.T) {
	base := synthStanzas(1500, 65)
	parent, err := Build(base, nil, testName)
	if err != nil {
		t.Fatal(err)
	}
	segs := xzSegmentsOf(t, parent, defaultChunking)
	chunks := len(segs) - 1
	if chunks < 3 {
		t.Fatalf("%d chunks of LZMA2 data, want 3 or more", chunks)
	}
	// A bit flipped in the middle of the second chunk's LZMA2 data: the stream's framing is
	// as Build writes it, but the chunk decodes to other bytes, if at all.
	alteredData := bytes.Clone(parent.Xz)
	alteredData[(segs[1]+segs[2])/2] ^= 0x10
	// The second chunk's first LZMA2 chunk header says one byte more of packed data: the
	// data no longer tiles as Build cuts it.
	alteredFraming := bytes.Clone(parent.Xz)
	alteredFraming[segs[1]+4]++
	for _, tc := range []struct {
		name     string
		xz       []byte
		signed   bool
		want     int  // xz chunks seeded
		wantLess bool // fewer than want, rather than exactly want
	}{
		{"data, unsigned", alteredData, false, chunks - 1, false},
		{"data, signed", alteredData, true, chunks, false},
		{"framing, unsigned", alteredFraming, false, chunks, true},
		{"framing, signed", alteredFraming, true, chunks, true},
	} {
		st, err := openCache(t, t.TempDir()).SeedPublished(testName, Published{Plain: parent.Plain, Gzip: parent.Gzip, Xz: tc.xz, Signed: tc.signed})
		if err != nil {
			t.Fatal(err)
		}
		checkSeedStats(t, st)
		if ok := st.XZ.Seeded == tc.want; tc.wantLess {
			ok = st.XZ.Seeded < tc.want
			if !ok || st.XZ.Why == nil {
				t.Errorf("%s: seed stats %+v, want fewer than %d xz chunks seeded, and why", tc.name, st, tc.want)
			}
		} else if !ok || st.Gzip.Seeded != st.Chunks {
			t.Errorf("%s: seed stats %+v, want %d xz chunks seeded", tc.name, st, tc.want)
		}
	}
}

func TestGunzipErrors(t *testing.T) {
	one, err := compressGzipMember([]byte("Package: a\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(one)
	damaged[len(damaged)-5] ^= 1 // the length in the trailer
	for name, gz := range map[string][]byte{
		"empty":            nil,
		"not gzip":         []byte("Package: a\n"),
		"truncated":        one[:len(one)-3],
		"bad length":       damaged,
		"trailing garbage": append(bytes.Clone(one), "junk"...),
	} {
		if _, _, err := Gunzip(gz, 0); err == nil {
			t.Errorf("%s: Gunzip accepted it", name)
		}
	}
}

// FuzzGunzip: whatever Gunzip accepts, the standard library's reader decodes to the same
// bytes, and the members tile both the file and the plain bytes.
func FuzzGunzip(f *testing.F) {
	one, err := compressGzipMember([]byte("Package: a\nVersion: 1\n\n"))
	if err != nil {
		f.Fatal(err)
	}
	two, err := compressGzipMember(bytes.Repeat([]byte("Package: b\n\n"), 50))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one)
	f.Add(append(bytes.Clone(one), two...))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, gz []byte) {
		plain, members, err := Gunzip(gz, len(gz))
		if err != nil {
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("Gunzip accepted what compress/gzip refuses: %v", err)
		}
		want, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("Gunzip accepted what compress/gzip refuses: %v", err)
		}
		if !bytes.Equal(plain, want) {
			t.Fatalf("Gunzip gave %d bytes, compress/gzip %d", len(plain), len(want))
		}
		off, pos := 0, 0
		for _, m := range members {
			if m.Off != off || m.PlainOff != pos {
				t.Fatalf("members %+v do not tile the file", members)
			}
			off, pos = off+m.Size, pos+m.PlainSize
		}
		if off != len(gz) || pos != len(plain) {
			t.Fatalf("members %+v cover %d of %d bytes, %d of %d plain", members, off, len(gz), pos, len(plain))
		}
	})
}

// TestSeedPublishedBackground: entries seeded in the background serve a Build on the same
// Cache at once, while they are written, and are all on disk once Wait returns, where a
// Build on a newly opened Cache finds them.
func TestSeedPublishedBackground(t *testing.T) {
	base, parent, plain, members := gunzippedParent(t, 65)
	dir := t.TempDir()
	c := openCache(t, dir)
	st, err := c.SeedPublished(testName, Published{Plain: plain, Gzip: parent.Gzip, Xz: parent.Xz, GzipMembers: members, Signed: true, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Gzip.Seeded != st.Chunks || st.XZ.Seeded != st.Chunks {
		t.Fatalf("seed stats %+v: want every chunk of both forms seeded", st)
	}
	buildFromCache(t, base, c, parent)
	c.Wait()
	if n := len(c.held); n != 0 {
		t.Errorf("%d entries still held in memory after Wait", n)
	}
	fresh := openCache(t, dir)
	buildFromCache(t, base, fresh, parent)
	if s := fresh.Stats(); s.Corrupt != 0 {
		t.Errorf("build stats on the cache as written: %+v, want every entry found intact", s)
	}
}

// TestGunzipMembersParallel: the members of an index Build wrote are found by their
// headers and decoded at once, to what decoding them one after the other gives. A file
// with those header bytes inside a member's data, or with a member of another writer's
// header, decodes just the same, one member after the other.
func TestGunzipMembersParallel(t *testing.T) {
	parent, err := Build(synthStanzas(6000, 7), nil, testName)
	if err != nil {
		t.Fatal(err)
	}
	if len(parent.Gzip) < parallelGunzipMin {
		t.Fatalf("the test index's .gz is %d bytes, under %d", len(parent.Gzip), parallelGunzipMin)
	}
	serial, serialMembers, err := gunzipSerial(parent.Gzip, 0)
	if err != nil {
		t.Fatal(err)
	}
	plain, members, ok := gunzipMembers(parent.Gzip)
	if !ok {
		t.Fatal("Build's .gz was not decoded member by member in parallel")
	}
	sameBytes(t, "decoded in parallel", plain, serial)
	if len(members) < 3 || !slices.Equal(members, serialMembers) {
		t.Errorf("members %v, want %v", members, serialMembers)
	}
	if cap(plain) < PlainCap(len(plain)) {
		t.Errorf("capacity %d, want room to splice (%d)", cap(plain), PlainCap(len(plain)))
	}

	// Random bytes do not compress: deflate stores them as they are, the header's bytes
	// within them too.
	noise := make([]byte, 300<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	copy(noise[100<<10:], memberHeader)
	trap, err := compressGzipMember(noise)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(trap[len(memberHeader):], memberHeader) {
		t.Fatal("the trap member does not hold the header's bytes")
	}
	var other bytes.Buffer
	zw := gzip.NewWriter(&other)
	zw.Name = "other"
	zw.Write(noise[:1000])
	zw.Close()
	for name, gz := range map[string][]byte{
		"header bytes inside a member": slices.Concat(parent.Gzip, trap),
		"another writer's member":      slices.Concat(parent.Gzip, other.Bytes()),
	} {
		if _, _, ok := gunzipMembers(gz); ok {
			t.Errorf("%s: decoded in parallel", name)
		}
		want, wantMembers, err := gunzipSerial(gz, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, gotMembers, err := Gunzip(gz, 0)
		if err != nil || !bytes.Equal(got, want) || !slices.Equal(gotMembers, wantMembers) {
			t.Errorf("%s: Gunzip gave %d bytes, %d members (%v), want %d bytes, %d members", name, len(got), len(gotMembers), err, len(want), len(wantMembers))
		}
	}

	// A damaged member is an error, as decoding one after the other finds it.
	bad := bytes.Clone(parent.Gzip)
	bad[members[1].Off+members[1].Size-8] ^= 1 // its CRC
	if _, _, err := Gunzip(bad, 0); err == nil {
		t.Error("a member with a wrong CRC decoded")
	}
}
