package index

import "github.com/armor-apt/armor/internal/testkit/synth"

var (
	synthStanza  = synth.Stanza
	synthStanzas = synth.Stanzas
	synthName    = synth.StanzaName
)

// insertAt returns stanzas with s inserted before index i, leaving stanzas unchanged.
func insertAt(stanzas [][]byte, i int, s []byte) [][]byte {
	out := make([][]byte, 0, len(stanzas)+1)
	out = append(out, stanzas[:i]...)
	out = append(out, s)
	return append(out, stanzas[i:]...)
}
