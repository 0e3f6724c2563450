package gen

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// TestSumsMatchOlderRelease: a Release armor wrote before it dropped SHA-1 lists it, and
// verify still holds a file to it.
func TestSumsMatchOlderRelease(t *testing.T) {
	data := []byte("Package: a\n")
	got := digestsOf(data)
	s1 := sha1.Sum(data)
	want := got
	want.SHA1 = hex.EncodeToString(s1[:])
	if got.SHA1 != "" {
		t.Fatalf("digestsOf computed a SHA-1: %+v", got)
	}
	if !sumsMatch(data, got, want) {
		t.Fatal("a file whose every sum matches an older Release does not match")
	}
	want.SHA1 = strings.Repeat("0", 40)
	if sumsMatch(data, got, want) {
		t.Fatal("a file whose SHA-1 differs from the Release's matches")
	}
}
