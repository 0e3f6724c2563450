package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// ValidDigest reports whether sum is 64 lowercase hex digits.
func ValidDigest(sum string) bool {
	if len(sum) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(sum); i++ {
		c := sum[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkDigest returns an error wrapping ErrInvalidDigest unless sum is valid.
func checkDigest(sum string) error {
	if !ValidDigest(sum) {
		return fmt.Errorf("%w: %q", ErrInvalidDigest, sum)
	}
	return nil
}

// verifier passes on exactly size bytes of r while hashing them. Before it hands out the
// last bytes it makes sure r has nothing more and that the SHA-256 matches; otherwise
// that read returns no bytes and an error wrapping ErrDigestMismatch, so a consumer never
// holds a complete mismatching object and an upload aborts before it is complete. The
// failure is sticky.
type verifier struct {
	r    io.Reader
	sum  string
	size int64
	h    hash.Hash
	n    int64
	err  error
	done bool
}

func newVerifier(r io.Reader, sum string, size int64) *verifier {
	return &verifier{r: r, sum: sum, size: size, h: sha256.New()}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.done {
		return 0, io.EOF
	}
	if rem := v.size - v.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	var n int
	var err error
	if len(p) > 0 {
		n, err = v.r.Read(p)
		v.h.Write(p[:n])
		v.n += int64(n)
	}
	switch {
	case v.n == v.size:
		// Withhold the last bytes until they are verified: a consumer that got every
		// byte may complete the object (an HTTP server has its whole Content-Length)
		// whatever error comes with them.
		if err := v.finish(); err != io.EOF {
			return 0, err
		}
		return n, nil
	case err == io.EOF:
		v.err = v.mismatch(fmt.Sprintf("only %d bytes", v.n))
		return n, v.err
	case err != nil:
		v.err = err
		return n, err
	}
	return n, nil
}

// finish checks, once size bytes have been read, that r is exhausted and the digest
// matches.
func (v *verifier) finish() error {
	var one [1]byte
	for tries := 0; ; tries++ {
		n, err := v.r.Read(one[:])
		if n > 0 {
			v.err = v.mismatch(fmt.Sprintf("more than %d bytes", v.size))
			return v.err
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			v.err = err
			return err
		}
		if tries > 100 {
			v.err = io.ErrNoProgress
			return v.err
		}
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.sum {
		v.err = v.mismatch(fmt.Sprintf("%d bytes with sha256 %s", v.n, got))
		return v.err
	}
	v.done = true
	return io.EOF
}

// Verify reads whatever the consumer left unread and reports whether the whole content
// matched: nil only if it did.
func (v *verifier) Verify() error {
	if v.done || v.err != nil {
		return v.err
	}
	_, err := io.Copy(io.Discard, v)
	if err != nil {
		return err
	}
	return v.err
}

func (v *verifier) mismatch(got string) error {
	return fmt.Errorf("object %s: %w: declared %d bytes, got %s", v.sum, ErrDigestMismatch, v.size, got)
}
