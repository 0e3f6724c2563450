package edged

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

var ctPGPKeys = []byte("application/pgp-keys")

// keyringRoutes makes the routes of a repository's public keys, served at the root of
// each of its hostnames as README tells apt users: /<repository>-archive-keyring.gpg, the
// binary keyring apt's Signed-By and gpgv take (the keys' packets one after the other,
// as gpg --export writes them), and /<repository>-archive-keyring.asc, the same keyring
// armored. keys are the armored keys of the routes feed; one that cannot be read is
// skipped and reported in the error (the others are still served). No keys, no routes.
func keyringRoutes(repo string, keys []string) (map[string]*route, error) {
	var bin bytes.Buffer
	var bad error
	for i, k := range keys {
		blk, err := armor.Decode(bytes.NewReader([]byte(k)))
		if err == nil && blk.Type != "PGP PUBLIC KEY BLOCK" {
			err = fmt.Errorf("armor type %q", blk.Type)
		}
		var body []byte
		if err == nil {
			body, err = io.ReadAll(blk.Body)
		}
		if err != nil {
			bad = fmt.Errorf("repository %s: key %d of the routes feed: %w", repo, i+1, err)
			continue
		}
		bin.Write(body)
	}
	if bin.Len() == 0 {
		return nil, bad
	}
	var asc bytes.Buffer
	w, err := armor.Encode(&asc, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		return nil, fmt.Errorf("repository %s: armor keyring: %w", repo, err)
	}
	if _, err := w.Write(bin.Bytes()); err != nil {
		return nil, fmt.Errorf("repository %s: armor keyring: %w", repo, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("repository %s: armor keyring: %w", repo, err)
	}
	asc.WriteByte('\n')
	base := repo + "-archive-keyring"
	return map[string]*route{
		base + ".gpg": memoryRoute(bin.Bytes(), ctPGPKeys),
		base + ".asc": memoryRoute(asc.Bytes(), ctPGPKeys),
	}, bad
}

// memoryRoute is a route whose bytes the edge holds itself (not in the store).
func memoryRoute(b []byte, ct []byte) *route {
	s := sha256.Sum256(b)
	sum := hex.EncodeToString(s[:])
	return &route{sum: sum, key: cacheKey(sum), size: int64(len(b)), body: b,
		etag: []byte(`"` + sum + `"`), contentType: ct, cacheControl: ccShort}
}
