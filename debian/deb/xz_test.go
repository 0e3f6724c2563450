package deb

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// controlTar returns an uncompressed control.tar holding the control file and a
// md5sums file big enough to spread over several 1 KiB xz blocks.
func controlTar(t *testing.T, control string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var sums strings.Builder
	for i := range 200 {
		sums.WriteString(strings.Repeat(string(rune('a'+i%26)), 32) + "  usr/share/doc/x/file" + string(rune('A'+i%26)) + "\n")
	}
	for _, f := range []struct{ name, data string }{{"./md5sums", sums.String()}, {"./control", control}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func xzCompress(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	needTool(t, "xz")
	cmd := exec.Command("xz", append([]string{"--compress", "--stdout"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz %v: %v", args, err)
	}
	return out
}

func debWithControlXZ(t *testing.T, controlXZ []byte) []byte {
	t.Helper()
	return arArchive(
		arMember{"debian-binary", []byte("2.0\n")},
		arMember{"control.tar.xz", controlXZ},
		arMember{"data.tar.gz", tarGz(t, map[string]string{"./usr/x": "x"})},
	)
}

// TestReadControlXZ reads control.tar.xz as xz(1) writes it in its various
// forms: one block or many, with and without sizes in the block headers (the
// multi-threaded encoder writes them), with each kind of check.
func TestReadControlXZ(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"dpkg preset", []string{"-6"}},
		{"blocks without sizes", []string{"-T1", "--block-size=1024"}},
		{"blocks with sizes", []string{"-T2", "--block-size=1024"}},
		{"crc32", []string{"--check=crc32", "-T2", "--block-size=1500"}},
		{"sha256", []string{"--check=sha256", "--block-size=700"}},
		{"no check", []string{"--check=none", "-T2", "--block-size=4096"}},
		{"big dictionary", []string{"-9"}},
	}
	ctlTar := controlTar(t, goodControl)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := debWithControlXZ(t, xzCompress(t, ctlTar, tt.args...))
			p, err := Read(bytes.NewReader(data), "hello.deb", int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != "hello" || len(p.Fields) != 5 {
				t.Errorf("got package %q with %d fields, want hello with 5", p.Name, len(p.Fields))
			}
		})
	}
}

func TestReadControlXZRejects(t *testing.T) {
	xzData := xzCompress(t, controlTar(t, goodControl), "-T2", "--block-size=1024")
	tests := []struct {
		name   string
		mutate func([]byte)
		want   string
	}{
		{"huge dictionary", func(b []byte) { setXZDict(t, b, 38) }, "dictionary"},
		{"block header checksum", func(b []byte) { b[13] ^= 0x40 }, "checksum"},
		{"stream header checksum", func(b []byte) { b[7] = 0x0a }, "checksum"},
		{"not xz", func(b []byte) { b[0] = 'X' }, "not an xz stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(xzData)
			tt.mutate(b)
			data := debWithControlXZ(t, b)
			_, err := Read(bytes.NewReader(data), "hello.deb", int64(len(data)))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "control.tar.xz") {
				t.Fatalf("Read = %v, want an error about control.tar.xz mentioning %q", err, tt.want)
			}
		})
	}
}

// setXZDict rewrites the LZMA2 dictionary code of the first block header and
// fixes the header's CRC32, so only the dictionary size is wrong.
func setXZDict(t *testing.T, b []byte, code byte) {
	t.Helper()
	n := (int(b[12]) + 1) * 4
	h := b[12 : 12+n]
	i := bytes.Index(h, []byte{lzma2Filter, 1})
	if i < 0 {
		t.Fatal("no LZMA2 filter in the block header")
	}
	h[i+2] = code
	binary.LittleEndian.PutUint32(h[n-4:], crc32.ChecksumIEEE(h[:n-4]))
}

func TestParseXZBlockHeaderReal(t *testing.T) {
	// The real fixtures' control.tar.xz come from dpkg-deb: one block, sizes
	// stated, 8 MiB dictionary.
	for _, path := range realDebs(t) {
		member := arMemberData(t, path, "control.tar.xz")
		n := (int(member[12]) + 1) * 4
		dict, uncompressed, err := parseXZBlockHeader(member[12 : 12+n-4])
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if dict != 8<<20 || uncompressed <= 0 || uncompressed > 64<<10 {
			t.Errorf("%s: dictionary %d, uncompressed size %d; want 8 MiB and a few KiB", path, dict, uncompressed)
		}
	}
}

// arMemberData returns the data of a named member of an ar archive.
func arMemberData(t *testing.T, path, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := 8; off+60 <= len(b); {
		size, err := strconv.Atoi(strings.TrimSpace(string(b[off+48 : off+58])))
		if err != nil || off+60+size > len(b) {
			t.Fatalf("%s: bad ar member header at %d", path, off)
		}
		if strings.TrimRight(strings.TrimSpace(string(b[off:off+16])), "/") == name {
			return b[off+60 : off+60+size]
		}
		off += 60 + size + size%2
	}
	t.Fatalf("%s has no member %s", path, name)
	return nil
}
