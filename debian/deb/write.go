package deb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// File is one file a package installs.
type File struct {
	Path     string // absolute, such as /usr/share/keyrings/acme-archive-keyring.gpg
	Data     []byte
	Mode     int64 // 0644 when zero
	Conffile bool  // listed in conffiles: dpkg keeps the admin's changes
}

// Write returns a binary package (format 2.0: debian-binary, control.tar.gz,
// data.tar.gz) of the control paragraph and files. control holds the fields, one per
// line, without Installed-Size, which Write adds. scripts are maintainer scripts
// ("/postinst", "/prerm", ...), made executable. Every timestamp is mtime, so the same
// arguments give the same bytes.
func Write(control string, files []File, mtime time.Time, scripts ...File) ([]byte, error) {
	var installed int64
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var conffiles []string
	for _, f := range sorted {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("package file %q: not a clean absolute path", f.Path)
		}
		installed += (int64(len(f.Data)) + 1023) / 1024
		if f.Conffile {
			conffiles = append(conffiles, f.Path)
		}
	}
	control = strings.TrimRight(control, "\n") + "\nInstalled-Size: " + strconv.FormatInt(max(installed, 1), 10) + "\n"
	ctl := []File{{Path: "/control", Data: []byte(control)}}
	if len(conffiles) > 0 {
		ctl = append(ctl, File{Path: "/conffiles", Data: []byte(strings.Join(conffiles, "\n") + "\n")})
	}
	for _, sc := range scripts {
		if strings.Count(sc.Path, "/") != 1 || !path.IsAbs(sc.Path) {
			return nil, fmt.Errorf("maintainer script %q: want a name such as /postinst", sc.Path)
		}
		sc.Mode = 0o755
		ctl = append(ctl, sc)
	}
	controlTar, err := tarGzFiles(ctl, mtime, false)
	if err != nil {
		return nil, err
	}
	dataTar, err := tarGzFiles(sorted, mtime, true)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", controlTar}, {"data.tar.gz", dataTar}} {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, mtime.Unix(), 0, 0, "100644", len(m.data))
		b.Write(m.data)
		if len(m.data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// tarGzFiles writes files into a gzipped tar as dpkg-deb lays one out: "./" names, and with
// dirs the parent directories, each once, before their files.
func tarGzFiles(files []File, mtime time.Time, dirs bool) ([]byte, error) {
	var b bytes.Buffer
	gz, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	hdr := func(name string, mode int64, size int64, typ byte) *tar.Header {
		return &tar.Header{Name: name, Mode: mode, Size: size, Typeflag: typ, ModTime: mtime,
			Uname: "root", Gname: "root", Format: tar.FormatGNU}
	}
	if err := tw.WriteHeader(hdr("./", 0o755, 0, tar.TypeDir)); err != nil {
		return nil, err
	}
	made := map[string]bool{}
	for _, f := range files {
		if dirs {
			var parts []string
			for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
				parts = append([]string{d}, parts...)
			}
			for _, d := range parts {
				if !made[d] {
					made[d] = true
					if err := tw.WriteHeader(hdr("."+d+"/", 0o755, 0, tar.TypeDir)); err != nil {
						return nil, err
					}
				}
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(hdr("."+f.Path, mode, int64(len(f.Data)), tar.TypeReg)); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, bytes.NewReader(f.Data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
