package deb

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWriteReads: what Write makes, Read reads back with its fields and Installed-Size;
// the same arguments give the same bytes; a relative path is refused.
func TestWriteReads(t *testing.T) {
	control := "Package: kk\nVersion: 1.0\nArchitecture: all\nMaintainer: m <m@example.org>\nDescription: d\n"
	files := []File{{Path: "/usr/share/k/a", Data: bytes.Repeat([]byte("x"), 3000)}, {Path: "/etc/k.conf", Data: []byte("c\n"), Conffile: true}}
	when := time.Unix(1767225600, 0)
	a, err := Write(control, files, when)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Write(control, files, when)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same package differ")
	}
	p, err := Read(bytes.NewReader(a), "k.deb", int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "kk" || p.Version != "1.0" || p.Architecture != "all" {
		t.Errorf("read back %s %s %s", p.Name, p.Version, p.Architecture)
	}
	if st := string(p.Stanza("pool/k.deb")); !strings.Contains(st, "\nInstalled-Size: 4\n") {
		t.Errorf("stanza lacks Installed-Size: 4 (3 KiB and 1 KiB rounded up):\n%s", st)
	}
	if _, err := Write(control, []File{{Path: "etc/x"}}, when); err == nil {
		t.Error("a relative path was accepted")
	}
}
