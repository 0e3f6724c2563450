package synth

import (
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Stanzas without .deb files, for the tests and benchmarks of index assembly and
// compression, which need Packages text and no archive.

var stanzaWords = strings.Fields(`library development files tools utility daemon client server
	documentation plugin python perl ruby rust golang bindings runtime shared static data
	graphical terminal network audio video image parser compiler debugger kernel module
	firmware driver extension theme fonts locale translation interface backend frontend`)

// Stanza returns a Packages stanza that looks like a real one (about 700 bytes): the
// fields apt-ftparchive writes, in its order, with hashes that do not compress.
func Stanza(r *rand.Rand, name, version string) []byte {
	var b strings.Builder
	pick := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = stanzaWords[r.IntN(len(stanzaWords))]
		}
		return strings.Join(ws, " ")
	}
	size := 1000 + r.IntN(5_000_000)
	file := fmt.Sprintf("pool/main/%c/%s/%s_%s_amd64.deb", name[0], name, name, version)
	fmt.Fprintf(&b, "Package: %s\nVersion: %s\nArchitecture: amd64\n", name, version)
	fmt.Fprintf(&b, "Maintainer: %s Team <%s@lists.example.org>\n", name, name)
	fmt.Fprintf(&b, "Installed-Size: %d\n", size/700)
	fmt.Fprintf(&b, "Depends: libc6 (>= 2.%d), lib%s%d (= %s)\n", 30+r.IntN(8), name, r.IntN(3), version)
	fmt.Fprintf(&b, "Section: %s\nPriority: optional\n", stanzaWords[r.IntN(len(stanzaWords))])
	fmt.Fprintf(&b, "Homepage: https://%s.example.org/\n", name)
	fmt.Fprintf(&b, "Filename: %s\nSize: %d\n", file, size)
	fmt.Fprintf(&b, "MD5sum: %x\n", md5.Sum([]byte(file)))
	fmt.Fprintf(&b, "SHA256: %x\n", sha256.Sum256([]byte(file)))
	fmt.Fprintf(&b, "Description: %s\n", pick(5))
	for range 3 + r.IntN(4) {
		fmt.Fprintf(&b, " %s.\n", pick(8+r.IntN(6)))
	}
	return []byte(b.String())
}

// Stanzas returns n stanzas of distinct, sorted package names; the same n and seed
// give the same stanzas.
func Stanzas(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]byte, n)
	for i := range out {
		out[i] = Stanza(r, StanzaName(i), fmt.Sprintf("%d.%d-%d", 1+r.IntN(9), r.IntN(30), 1+r.IntN(4)))
	}
	return out
}

// StanzaName returns the i-th package name; names sort in the order of i.
func StanzaName(i int) string {
	return fmt.Sprintf("pkg%07d", i)
}
