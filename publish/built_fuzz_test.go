package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseBuildRecord: a build record file, whatever its bytes, is refused with an
// error naming the file or decoded into a record that passes its checks and that,
// written again, reads back the same.
func FuzzParseBuildRecord(f *testing.F) {
	msum := strings.Repeat("ab", 32)
	good, err := encodeBuildRecord(&buildRecord{
		Manifest: msum, Repository: "test", Release: strings.Repeat("01", 32), Parent: strings.Repeat("23", 32), Objects: 3,
		New: []builtObject{{SHA256: strings.Repeat("45", 32), Size: 7, Path: "pool/main/a/a/a_1_amd64.deb"}},
	})
	if err != nil {
		f.Fatal(err)
	}
	_, body, _ := bytes.Cut(good, []byte("\n"))
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(body)
	f.Add([]byte(`{"new":[{"path":"../x"}]}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The data as a whole file, and as the content of a file whose digest matches
		// it, so that the fuzzer reaches the decoding and the checks.
		sum := sha256.Sum256(data)
		sealed := append([]byte(builtHeader+hex.EncodeToString(sum[:])+"\n"), data...)
		parseFuzzed(t, data)
		parseFuzzed(t, sealed)
	})
}

func parseFuzzed(t *testing.T, data []byte) {
	r, err := parseBuildRecord(data, "cache/built")
	if err != nil {
		if !strings.Contains(err.Error(), "cache/built") {
			t.Errorf("the error does not name the file: %v", err)
		}
		return
	}
	if err := r.check(); err != nil {
		t.Fatalf("accepted a record that fails its checks: %v", err)
	}
	again, err := encodeBuildRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseBuildRecord(again, "again")
	if err != nil {
		t.Fatalf("the encoding of an accepted record is refused: %v", err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("written again, the record %+v reads back as %+v", r, back)
	}
}
