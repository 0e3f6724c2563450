package xz

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
)

// TestLZMA2ReusedEncoder: an encoder taken again from the pool, after inputs of every
// size, writes what a new one writes; and both write what this encoder wrote before
// encoders were pooled (the digests below), as `armor rebuild` compares Packages.xz byte
// for byte with the releases that earlier versions built.
func TestLZMA2ReusedEncoder(t *testing.T) {
	want := map[string]string{
		"empty 0":        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"mixed 0":        "805f083835243ca9a51fe3c8f635e1ecf6d59a8ec64a2f6b128f2c6da6cc3c9e",
		"mixed 85333":    "f7c26879fc3501ff9e7cdbedadfbd0e7abe542d4ee4c65d03ffce852226073cb",
		"one 0":          "8e32c89a492198efd00b642cdd8727c764047050359b9d7edc48e221740f99a0",
		"period 0":       "700a0be59f663efc5ccf51e9d9dd1cc5de0e12fefb9503c3b6370b47adff513f",
		"period 1000000": "10141d334f9688a047b5a43102a50405b92a62dfd32488df222b442bd798f3a5",
		"random 0":       "f01a7c2625625236fbbcb5f6a907dbb10a8230d29eed14a2b780a2372f5e7b70",
		"random 102400":  "faf3073cf7a09a4832ea9cf1a72d8884ec3473fc06acdd3dcc196990393eeb87",
		"run 0":          "c669007e392148051d2e4090d4b9b2fd67c94088651635233d662f759a7aa58e",
		"run 1048576":    "9cb177efc04cf56fc238058a8fa9e99af776e22fd3135cb7477ad42f4733f74e",
		"short 0":        "2122877e915e0a6098afed17a3bea3e33ebd10b1d5fb6721d4be184b748c99f3",
		"short 7":        "94aab1c20a3ce46f3c46ae9af35d867fed8e6103f8a041b1dc176f00c4420166",
		"text 0":         "4953de2412864ba9054e5f201e390a2d99a746f20e1551e61e64fd391c0c1b00",
		"text 436483":    "f3efc159bc5fd9afccbd0219288789bb36e656fb43aa5394a00e5bed759d4199",
	}
	in := lzma2Inputs()
	names := slices.Sorted(maps.Keys(in))
	fresh := map[string][]byte{}
	for _, n := range names {
		for _, start := range []int{0, len(in[n]) / 3} {
			encoders = sync.Pool{New: func() any { return &lzEncoder{} }}
			fresh[fmt.Sprint(n, " ", start)] = EncodeLZMA2(in[n], start, DefaultEffort)
		}
	}
	// Twice over every input, largest and smallest in turn: each call takes the encoder
	// the one before it used.
	for round := range 2 {
		for _, n := range names {
			for _, start := range []int{0, len(in[n]) / 3} {
				key := fmt.Sprint(n, " ", start)
				got := EncodeLZMA2(in[n], start, DefaultEffort)
				if !slices.Equal(got, fresh[key]) {
					t.Errorf("round %d, %s: a reused encoder wrote %d bytes that differ from a new one's %d", round, key, len(got), len(fresh[key]))
				}
				if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != want[key] {
					t.Errorf("round %d, %s: SHA-256 %x, want %s as before encoders were pooled", round, key, sum, want[key])
				}
			}
		}
	}
}
