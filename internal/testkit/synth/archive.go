package synth

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Epoch is the modification time given to every ar member and tar entry, so that
// archives are byte-identical from run to run.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Deb describes one archive for Encode.
type Deb struct {
	// Control is the control file, written as-is.
	Control []byte
	// Files are regular files for data.tar, by path relative to the root
	// ("usr/share/doc/foo/README"); their parent directories are added.
	Files []File
	// Compression of control.tar: "gz" (the default when empty), "xz", "zst"
	// or "none". data.tar is always gzip-compressed.
	Compression string
	// StoreData writes data.tar.gz with stored (uncompressed) deflate blocks,
	// which is quicker for payloads that would not compress anyway.
	StoreData bool
}

// File is one regular file in a package's data.tar.
type File struct {
	Path string
	Data []byte
}

// Encode writes d as a .deb: an ar archive of debian-binary, control.tar[.ext]
// and data.tar.gz.
func Encode(w io.Writer, d Deb) error {
	var e encoder
	b, err := e.encode(d)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// encoder keeps buffers and a gzip writer for reuse across packages.
type encoder struct {
	out, ctl, data, tarBuf bytes.Buffer
	gz                     map[int]*gzip.Writer // by compression level
}

func (e *encoder) encode(d Deb) ([]byte, error) {
	e.ctl.Reset()
	e.data.Reset()
	e.out.Reset()

	ext, err := e.compress(&e.ctl, d.Compression, gzip.BestSpeed, func(tw *tar.Writer) error {
		if err := writeDir(tw, "./"); err != nil {
			return err
		}
		return writeFile(tw, "./control", d.Control)
	})
	if err != nil {
		return nil, fmt.Errorf("build control.tar: %w", err)
	}
	dataLevel := gzip.BestSpeed
	if d.StoreData {
		dataLevel = gzip.NoCompression
	}
	if _, err := e.compress(&e.data, "gz", dataLevel, func(tw *tar.Writer) error {
		return writeTree(tw, d.Files)
	}); err != nil {
		return nil, fmt.Errorf("build data.tar: %w", err)
	}

	e.out.WriteString("!<arch>\n")
	arMember(&e.out, "debian-binary", []byte("2.0\n"))
	arMember(&e.out, "control.tar"+ext, e.ctl.Bytes())
	arMember(&e.out, "data.tar.gz", e.data.Bytes())
	return e.out.Bytes(), nil
}

// compress writes a tar stream built by fill into dst, compressed as named, and
// returns the member name's extension.
func (e *encoder) compress(dst *bytes.Buffer, compression string, level int, fill func(*tar.Writer) error) (string, error) {
	e.tarBuf.Reset()
	tw := tar.NewWriter(&e.tarBuf)
	if err := fill(tw); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	switch compression {
	case "", "gz":
		gz := e.gz[level]
		if gz == nil {
			var err error
			if gz, err = gzip.NewWriterLevel(dst, level); err != nil {
				return "", err
			}
			if e.gz == nil {
				e.gz = map[int]*gzip.Writer{}
			}
			e.gz[level] = gz
		} else {
			gz.Reset(dst)
		}
		if _, err := gz.Write(e.tarBuf.Bytes()); err != nil {
			return "", err
		}
		return ".gz", gz.Close()
	case "xz":
		xw, err := xz.NewWriter(dst)
		if err != nil {
			return "", err
		}
		if _, err := xw.Write(e.tarBuf.Bytes()); err != nil {
			return "", err
		}
		return ".xz", xw.Close()
	case "zst":
		zw, err := zstd.NewWriter(dst, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return "", err
		}
		if _, err := zw.Write(e.tarBuf.Bytes()); err != nil {
			return "", err
		}
		return ".zst", zw.Close()
	case "none":
		dst.Write(e.tarBuf.Bytes())
		return "", nil
	default:
		return "", fmt.Errorf("unknown compression %q", compression)
	}
}

func writeTree(tw *tar.Writer, files []File) error {
	dirs := map[string]bool{}
	if err := writeDir(tw, "./"); err != nil {
		return err
	}
	for _, f := range files {
		for i := 0; i < len(f.Path); i++ {
			if f.Path[i] != '/' {
				continue
			}
			dir := "./" + f.Path[:i+1]
			if !dirs[dir] {
				dirs[dir] = true
				if err := writeDir(tw, dir); err != nil {
					return err
				}
			}
		}
		if err := writeFile(tw, "./"+f.Path, f.Data); err != nil {
			return err
		}
	}
	return nil
}

func writeDir(tw *tar.Writer, name string) error {
	return tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: name, Mode: 0o755,
		Uname: "root", Gname: "root", ModTime: Epoch, Format: tar.FormatGNU,
	})
}

func writeFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)),
		Uname: "root", Gname: "root", ModTime: Epoch, Format: tar.FormatGNU,
	}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// arMember appends one member in the common ar format dpkg-deb writes.
func arMember(out *bytes.Buffer, name string, data []byte) {
	var h [60]byte
	for i := range h {
		h[i] = ' '
	}
	copy(h[0:16], name)
	copy(h[16:28], strconv.FormatInt(Epoch.Unix(), 10))
	copy(h[28:34], "0")
	copy(h[34:40], "0")
	copy(h[40:48], "100644")
	copy(h[48:58], strconv.Itoa(len(data)))
	h[58], h[59] = '`', '\n'
	out.Write(h[:])
	out.Write(data)
	if len(data)%2 == 1 {
		out.WriteByte('\n')
	}
}
