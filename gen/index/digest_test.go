package index

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/armor-apt/armor/gen/xz"
)

// wholeDigests hashes data whole, independently of the code under test.
func wholeDigests(data []byte) Digests {
	m, s256 := md5.Sum(data), sha256.Sum256(data)
	return Digests{Size: int64(len(data)), MD5: hex.EncodeToString(m[:]), SHA256: hex.EncodeToString(s256[:])}
}

// checkDigests checks f.Digests against hashing each form whole.
func checkDigests(t testing.TB, f *Files) {
	t.Helper()
	for i, data := range [][]byte{f.Plain, f.Gzip, f.Xz} {
		if want := wholeDigests(data); f.Digests[i] != want {
			t.Errorf("digests of %s: got %+v, want %+v", []string{"plain", "gzip", "xz"}[i], f.Digests[i], want)
		}
	}
}

// sizes returns the total size of the three forms of f, and the size of what follows the
// chunks' LZMA2 data in the xz form (the end of the block, the index and the footer), which
// every build hashes afresh.
func sizes(f *Files) (total, xzTail int64) {
	for _, d := range f.Digests {
		total += d.Size
	}
	footer := f.Xz[len(f.Xz)-xz.HeaderSize:]
	backward := int64(footer[4]) | int64(footer[5])<<8 | int64(footer[6])<<16 | int64(footer[7])<<24
	index := f.Xz[len(f.Xz)-xz.HeaderSize-int((backward+1)*4):]
	if index[1] == 0 { // no block
		return total, int64(len(index))
	}
	unpadded, n := binary.Uvarint(index[2:]) // an xz VLI is a uvarint
	if n <= 0 {
		panic("bad index")
	}
	lzEnd := xz.HeaderSize + int64(unpadded) - xz.CheckSize - 1
	return total, int64(len(f.Xz)) - lzEnd
}

// TestDigestsFollowChanges builds an index, changes it, and builds it again from the digest
// state of the first build: the digests are always those of the whole files, and what is
// hashed runs from the first changed chunk to the end.
func TestDigestsFollowChanges(t *testing.T) {
	base := synthStanzas(600, 51)
	extra := synthStanzas(601, 52)[600]
	tests := []struct {
		name    string
		stanzas [][]byte
		// want the share of the three forms hashed again within [min, max]
		min, max float64
	}{
		{"unchanged", base, 0, 0.01},
		{"change at start", slices.Replace(slices.Clone(base), 0, 1, extra), 0.9, 1},
		{"insert at start", insertAt(base, 0, extra), 0.9, 1},
		{"change in middle", slices.Replace(slices.Clone(base), 300, 301, extra), 0.35, 0.65},
		{"same-size edit in middle", sameSizeEdit(t, base, 300), 0.35, 0.65},
		{"change at end", slices.Replace(slices.Clone(base), 599, 600, extra), 0, 0.1},
		{"append", insertAt(base, 600, extra), 0, 0.1},
		{"remove last", base[:599], 0, 0.1},
		{"empty", nil, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustBuild(t, base, openCache(t, dir), small)
			c := openCache(t, dir)
			got := mustBuild(t, tc.stanzas, c, small)
			if want := mustBuild(t, tc.stanzas, nil, small); got.Digests != want.Digests {
				t.Errorf("digests with a cache %+v differ from those without %+v", got.Digests, want.Digests)
			}
			if len(tc.stanzas) == 0 {
				return
			}
			total, tail := sizes(got)
			s := c.Stats()
			share := float64(s.Digested) / float64(total)
			if share < tc.min || share > tc.max || s.Digested < tail {
				t.Errorf("hashed %d of %d bytes (%.2f), want a share in [%.2f, %.2f]", s.Digested, total, share, tc.min, tc.max)
			}
			if s.Corrupt != 0 {
				t.Errorf("stats %+v: no corrupt entry expected", s)
			}
			// The next build of the same stanzas resumes at the very end.
			c = openCache(t, dir)
			mustBuild(t, tc.stanzas, c, small)
			if s := c.Stats(); s.Digested != tail {
				t.Errorf("rebuilding unchanged: hashed %d bytes, want only the xz tail (%d)", s.Digested, tail)
			}
		})
	}
}

// sameSizeEdit returns stanzas with one letter changed in the description of a stanza from
// the i-th on, chosen so that the chunks keep their sizes: only the chain ids then tell
// the changed index from the old one.
func sameSizeEdit(t *testing.T, stanzas [][]byte, i int) [][]byte {
	t.Helper()
	cuts := small.cut(stanzas, mustHashes(t, stanzas))
	for ; i < len(stanzas); i++ {
		s := slices.Clone(stanzas[i])
		j := bytes.Index(s, []byte("\nDescription: ")) + len("\nDescription: ")
		s[j] ^= 0x01
		out := slices.Replace(slices.Clone(stanzas), i, i+1, s)
		if slices.Equal(small.cut(out, mustHashes(t, out)), cuts) {
			return out
		}
	}
	t.Fatal("no same-size edit keeps the chunks")
	return nil
}

// TestDigestsFollowRecompressedEntry replaces a cached gzip member by another valid member of
// the same chunk and size (as a new compressor version could write): the gzip digests
// follow the bytes read, not the chunk they decompress to.
func TestDigestsFollowRecompressedEntry(t *testing.T) {
	stanzas := synthStanzas(300, 65)
	dir := t.TempDir()
	first := mustBuild(t, stanzas, openCache(t, dir), small)
	hashes := mustHashes(t, stanzas)
	chunks, _ := layout(stanzas, small.cut(stanzas, hashes))
	ch := chunks[len(chunks)/2]
	plain := first.Plain[ch.off : ch.off+ch.size]
	// Another valid member of the same size: the same deflate data, another mtime.
	name := entryName(sha256.Sum256(plain), kindGzip)
	entry, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	member := entry[:len(entry)-trailerSize]
	member[4] ^= 0x01
	writeFile(t, filepath.Join(dir, name), encodeEntry(name, member, uint64(len(plain))))

	c := openCache(t, dir)
	got := mustBuild(t, stanzas, c, small)
	if bytes.Equal(got.Gzip, first.Gzip) {
		t.Fatal("the replaced member was not used: the test proves nothing")
	}
	sameBytes(t, "gunzipped", gunzipGo(t, got.Gzip), first.Plain)
	if s := c.Stats(); s.Misses != 0 || s.Corrupt != 0 {
		t.Errorf("stats %+v: want the replaced member read as an intact entry", s)
	}
}

// TestDigestsIgnoreBadState damages the digest state of a build, or puts another index's
// state in its place, and checks that the next build still gets the digests right.
func TestDigestsIgnoreBadState(t *testing.T) {
	base := synthStanzas(500, 61)
	other := synthStanzas(300, 62)
	changed := slices.Replace(slices.Clone(base), 480, 481, other[0])
	state := stateName(testName)
	tests := []struct {
		name        string
		damage      func(t *testing.T, dir string, entry []byte) []byte // returns the new state entry
		wantCorrupt int64
	}{
		{"missing", func(t *testing.T, dir string, entry []byte) []byte { return nil }, 0},
		{"empty", func(t *testing.T, dir string, entry []byte) []byte { return []byte{} }, 0},
		{"truncated", func(t *testing.T, dir string, entry []byte) []byte { return entry[:len(entry)/2] }, 1},
		{"torn tail", func(t *testing.T, dir string, entry []byte) []byte { return entry[:len(entry)-1] }, 1},
		{"state byte flipped", func(t *testing.T, dir string, entry []byte) []byte {
			entry[len(entry)/2] ^= 0x10
			return entry
		}, 1},
		{"other index's entry copied", func(t *testing.T, dir string, entry []byte) []byte {
			return otherState(t, dir, other)
		}, 1},
		{"other index's state under this name", func(t *testing.T, dir string, entry []byte) []byte {
			payload := otherState(t, dir, other)
			return encodeEntry(state, payload[:len(payload)-trailerSize], 0)
		}, 0},
		{"unknown format", func(t *testing.T, dir string, entry []byte) []byte {
			return encodeEntry(state, []byte("AIXDGST0 something else"), 0)
		}, 1},
		{"hash states garbled", func(t *testing.T, dir string, entry []byte) []byte {
			st, err := decodeDigestState(entry[:len(entry)-trailerSize])
			if err != nil {
				t.Fatal(err)
			}
			for fi := range st.forms {
				for i := range st.forms[fi] {
					st.forms[fi][i].state[0] = []byte("not an md5 state")
				}
			}
			return encodeEntry(state, st.encode(), 0)
		}, nForms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustBuild(t, base, openCache(t, dir), small)
			path := filepath.Join(dir, state)
			entry, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("no digest state after a build: %v", err)
			}
			if b := tc.damage(t, dir, entry); b == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, path, b)
			}
			c := openCache(t, dir)
			got := mustBuild(t, changed, c, small)
			total, _ := sizes(got)
			if s := c.Stats(); s.Corrupt != tc.wantCorrupt || s.Digested < total*9/10 {
				t.Errorf("stats %+v: want %d corrupt and all %d bytes hashed", s, tc.wantCorrupt, total)
			}
			// The state is rewritten: the next build resumes at the end.
			c = openCache(t, dir)
			mustBuild(t, changed, c, small)
			if s := c.Stats(); s.Corrupt != 0 || s.Digested > total/100 {
				t.Errorf("after rewrite, stats %+v: want nothing corrupt and little hashed", s)
			}
		})
	}
}

// otherState builds other under another name in a cache beside dir and returns its state
// entry.
func otherState(t *testing.T, dir string, other [][]byte) []byte {
	t.Helper()
	odir := filepath.Join(dir, "..", filepath.Base(dir)+"-other")
	if _, err := build(other, openCache(t, odir), "dists/other/main/binary-i386/Packages", small, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(odir, stateName("dists/other/main/binary-i386/Packages")))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDigestStatePerName checks that indexes built under different names in one cache keep
// their own states, and that an unchanged rebuild does not rewrite its state.
func TestDigestStatePerName(t *testing.T) {
	dir := t.TempDir()
	a, b := synthStanzas(400, 71), synthStanzas(400, 72)
	if _, err := build(a, openCache(t, dir), "a", small, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := build(b, openCache(t, dir), "b", small, nil); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(filepath.Join(dir, stateName("a")))
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(t, dir)
	f, err := build(a, c, "a", small, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDigests(t, f)
	total, tail := sizes(f)
	if s := c.Stats(); s.Digested != tail {
		t.Errorf("rebuilding a after b: hashed %d of %d bytes, want the xz tail only (%d)", s.Digested, total, tail)
	}
	after, err := os.Stat(filepath.Join(dir, stateName("a")))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("an unchanged rebuild rewrote its digest state")
	}
	if !slices.Contains(f.Entries, stateName("a")) {
		t.Errorf("Entries %v do not name the digest state %s, so Keep would not protect it", f.Entries, stateName("a"))
	}
}

// TestDigestStateKeptByPrune checks that Prune keeps the digest state of an index built or
// kept in the session, like its chunks.
func TestDigestStateKeptByPrune(t *testing.T) {
	dir := t.TempDir()
	f := mustBuild(t, synthStanzas(200, 81), openCache(t, dir), small)
	age(t, dir, keepFor+touchAfter+1, entries(t, dir)...)
	c := openCache(t, dir)
	c.Keep(f.Entries)
	if err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateName(testName))); err != nil {
		t.Errorf("digest state of a kept index pruned: %v", err)
	}
	if err := openCache(t, dir).Prune(); err != nil {
		t.Fatal(err)
	}
	age(t, dir, keepFor+touchAfter+1, entries(t, dir)...)
	if err := openCache(t, dir).Prune(); err != nil {
		t.Fatal(err)
	}
	if left := entries(t, dir); len(left) != 0 {
		t.Errorf("entries %v left after pruning an unused, old cache", left)
	}
}

// FuzzDigestState feeds arbitrary digest states to the parser and to a build. The payload
// is fuzzed under a valid entry check (the check itself is fuzzed with the other entries).
func FuzzDigestState(f *testing.F) {
	stanzas := synthStanzas(40, 91)
	tiny := chunking{min: 1 << 9, avg: 2 << 10, max: 4 << 10}
	dir := f.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		f.Fatal(err)
	}
	want, err := build(stanzas, c, "seed", tiny, nil)
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, stateName("seed"))
	entry, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	valid := entry[:len(entry)-trailerSize]
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:len(stateMagic)+4+minBoundarySize+100])
	f.Add(append(slices.Clone(stateMagic), make([]byte, 12+32)...)) // no boundaries
	f.Add(append(slices.Clone(stateMagic), 0xff, 0xff, 0xff, 0xff))
	f.Add([]byte{})
	f.Add([]byte("AIXDGST1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeDigestState(b)
		if err == nil {
			if again := st.encode(); !bytes.Equal(again, b) {
				t.Fatalf("decodeDigestState accepted %x, which encodes as %x", b, again)
			}
		}
		// Whatever the state says, a build resuming from it must neither fail nor panic. A
		// state that does not parse is ignored, so the digests must be right; one that
		// parses but holds other sums than its ids promise cannot be told from a true one
		// (only the entry check, valid here by construction, guards against it).
		if err := os.WriteFile(path, encodeEntry(stateName("seed"), b, 0), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := OpenCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, berr := build(stanzas, c, "seed", tiny, nil)
		if berr != nil {
			t.Fatalf("build: %v", berr)
		}
		if err != nil && got.Digests != want.Digests {
			t.Errorf("digests %+v after an unparsable state, want %+v", got.Digests, want.Digests)
		}
		if bytes.Equal(b, valid) && got.Digests != want.Digests {
			t.Errorf("digests %+v resuming from the true state, want %+v", got.Digests, want.Digests)
		}
	})
}
