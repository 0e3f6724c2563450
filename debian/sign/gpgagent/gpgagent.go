package gpgagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/eddsa"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/armor-apt/armor/debian/sign"
)

// Signer is a key gpg-agent holds.
type Signer struct {
	uri, fpr, grip, socket string
	pub                    crypto.PublicKey
	modulusLen             int    // RSA: bytes in a signature
	cert                   []byte // the OpenPGP certificate, as gpg exports it
}

var _ sign.Signer = (*Signer)(nil)

var fprRE = regexp.MustCompile(`^[0-9A-Fa-f]{40}$`)

// Open finds the key in gpg's keyring and the agent's socket (starting the agent if it
// is not running).
func Open(ctx context.Context, uri string) (*Signer, error) {
	fpr, ok := strings.CutPrefix(uri, "gpg-agent:")
	fpr = strings.ToUpper(strings.ReplaceAll(fpr, " ", ""))
	if !ok || !fprRE.MatchString(fpr) {
		return nil, fmt.Errorf("key URI %q: write gpg-agent:FINGERPRINT, the 40 hex digits `gpg --list-secret-keys` shows", uri)
	}
	s := &Signer{uri: "gpg-agent:" + fpr, fpr: fpr}
	if err := s.findKey(ctx); err != nil {
		return nil, err
	}
	out, err := gpg(ctx, "gpgconf", "--list-dirs", "agent-socket")
	if err != nil {
		return nil, fmt.Errorf("key %s: find gpg-agent's socket: %w", s.uri, err)
	}
	s.socket = strings.TrimSpace(string(out))
	if _, err := gpg(ctx, "gpgconf", "--launch", "gpg-agent"); err != nil {
		return nil, fmt.Errorf("key %s: start gpg-agent: %w: %w", s.uri, sign.ErrSignerUnavailable, err)
	}
	return s, nil
}

// Certificate returns the key's OpenPGP certificate, as `gpg --export` gives it.
func (s *Signer) Certificate() []byte { return s.cert }

// findKey reads the certificate and picks the key that signs: the one fpr names if it can
// sign, else (fpr naming a primary key) its newest signing subkey whose secret the agent
// has, as gpg picks it.
func (s *Signer) findKey(ctx context.Context) error {
	list, err := gpg(ctx, "gpg", "--batch", "--with-colons", "--with-keygrip", "--list-secret-keys", "--", s.fpr)
	if err != nil {
		return fmt.Errorf("key %s: gpg has no secret key %s (gpg --list-secret-keys): %w", s.uri, s.fpr, err)
	}
	type cand struct {
		fpr, grip string
		sign      bool
		created   int64
	}
	var cands []cand
	for line := range strings.Lines(string(list)) {
		f := strings.Split(strings.TrimRight(line, "\n"), ":")
		switch {
		case (f[0] == "sec" || f[0] == "ssb") && len(f) > 11:
			c := cand{sign: strings.Contains(f[11], "s")}
			c.created, _ = strconv.ParseInt(f[5], 10, 64)
			if f[1] == "r" || f[1] == "e" || f[1] == "i" || len(f) > 14 && f[14] == "#" {
				c.sign = false // revoked, expired, invalid, or only a stub of the secret key
			}
			cands = append(cands, c)
		case f[0] == "fpr" && len(f) > 9 && len(cands) > 0 && cands[len(cands)-1].fpr == "":
			cands[len(cands)-1].fpr = f[9]
		case f[0] == "grp" && len(f) > 9 && len(cands) > 0 && cands[len(cands)-1].grip == "":
			cands[len(cands)-1].grip = f[9]
		}
	}
	var pick *cand
	for i, c := range cands {
		switch {
		case c.fpr == s.fpr && c.sign:
			pick = &cands[i]
		case i > 0 && cands[0].fpr == s.fpr && !cands[0].sign && c.sign && (pick == nil || c.created > pick.created):
			pick = &cands[i]
		}
		if pick != nil && pick.fpr == s.fpr {
			break
		}
	}
	if pick == nil {
		return fmt.Errorf("key %s: neither the key nor a subkey of it can sign: %w", s.uri, sign.ErrNoSecretKey)
	}
	s.grip = pick.grip
	if s.cert, err = gpg(ctx, "gpg", "--batch", "--export", "--", s.fpr); err != nil || len(s.cert) == 0 {
		return fmt.Errorf("key %s: gpg --export: %v", s.uri, err)
	}
	return s.readPublic(pick.fpr)
}

// readPublic takes the public half of the key fpr from the certificate.
func (s *Signer) readPublic(fpr string) error {
	ents, err := sign.ReadKeyring(s.cert)
	if err != nil {
		return fmt.Errorf("key %s: %w", s.uri, err)
	}
	for _, e := range ents {
		keys := []*packet.PublicKey{e.PrimaryKey}
		for _, sub := range e.Subkeys {
			keys = append(keys, sub.PublicKey)
		}
		for _, k := range keys {
			if fmt.Sprintf("%X", k.Fingerprint) != fpr {
				continue
			}
			switch pub := k.PublicKey.(type) {
			case *rsa.PublicKey:
				s.pub, s.modulusLen = pub, (pub.N.BitLen()+7)/8
			case *eddsa.PublicKey:
				s.pub = ed25519.PublicKey(pub.X)
			default:
				return fmt.Errorf("key %s: a %T key: armor signs through gpg-agent with RSA and Ed25519 keys: %w", s.uri, pub, sign.ErrUnsupportedKey)
			}
			return nil
		}
	}
	return fmt.Errorf("key %s: %s is not in the exported certificate", s.uri, fpr)
}

// Public returns the public half of the key that signs.
func (s *Signer) Public() crypto.PublicKey { return s.pub }

// gcryptHash are libgcrypt's numbers of the hashes (the same as OpenPGP's).
var gcryptHash = map[crypto.Hash]int{crypto.SHA256: 8, crypto.SHA384: 9, crypto.SHA512: 10}

// Sign asks the agent for the signature of digest (SIGKEY, SETHASH, PKSIGN).
func (s *Signer) Sign(ctx context.Context, digest []byte, h crypto.Hash) ([]byte, error) {
	algo, ok := gcryptHash[h]
	if !ok {
		return nil, fmt.Errorf("key %s: unsupported hash %v", s.uri, h)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.socket)
	if err != nil {
		return nil, fmt.Errorf("key %s: reach gpg-agent: %w: %w", s.uri, sign.ErrSignerUnavailable, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	a := &assuan{r: bufio.NewReader(conn), w: conn}
	if _, err := a.response(); err != nil {
		return nil, s.wrap("greeting", err, ctx)
	}
	for _, cmd := range []string{
		"RESET",
		"SIGKEY " + s.grip,
		"SETKEYDESC " + escape(fmt.Sprintf("armor signs a Release with key %s.", s.fpr)),
		fmt.Sprintf("SETHASH %d %s", algo, strings.ToUpper(hex.EncodeToString(digest))),
	} {
		if _, err := a.call(cmd); err != nil {
			return nil, s.wrap(strings.Fields(cmd)[0], err, ctx)
		}
	}
	data, err := a.call("PKSIGN")
	if err != nil {
		return nil, s.wrap("PKSIGN", err, ctx)
	}
	return s.signature(data)
}

// signature takes the raw signature out of PKSIGN's S-expression.
func (s *Signer) signature(data []byte) ([]byte, error) {
	v, err := parseSexp(data)
	if err != nil {
		return nil, fmt.Errorf("key %s: gpg-agent's answer: %w", s.uri, err)
	}
	if _, ok := s.pub.(ed25519.PublicKey); ok {
		r, ok1 := v.value("r")
		sv, ok2 := v.value("s")
		if !ok1 || !ok2 || len(r) > 32 || len(sv) > 32 {
			return nil, fmt.Errorf("key %s: gpg-agent's answer is no EdDSA signature", s.uri)
		}
		return append(pad(r, 32), pad(sv, 32)...), nil
	}
	sig, ok := v.value("s")
	if !ok || len(sig) > s.modulusLen {
		return nil, fmt.Errorf("key %s: gpg-agent's answer is no RSA signature", s.uri)
	}
	return pad(sig, s.modulusLen), nil
}

func pad(b []byte, n int) []byte {
	return append(make([]byte, n-len(b)), b...)
}

// agentError is an ERR line of the agent: a libgpg-error code and its text.
type agentError struct {
	code int
	text string
}

func (e *agentError) Error() string { return fmt.Sprintf("gpg-agent: %s (error %d)", e.text, e.code) }

// deniedCodes are libgpg-error codes (the low 16 bits) of a refusal: bad passphrase, no
// secret key, bad PIN, cancelled, no pinentry, PIN blocked, not confirmed.
var deniedCodes = map[int]bool{11: true, 17: true, 87: true, 99: true, 85: true, 86: true, 114: true, 177: true}

func (s *Signer) wrap(doing string, err error, ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("key %s: %s: %w", s.uri, doing, ctx.Err())
	}
	var ae *agentError
	if errors.As(err, &ae) && deniedCodes[ae.code&0xffff] {
		return fmt.Errorf("key %s: %s: %w: %w", s.uri, doing, sign.ErrSignerDenied, err)
	}
	if errors.As(err, &ae) {
		return fmt.Errorf("key %s: %s: %w", s.uri, doing, err)
	}
	return fmt.Errorf("key %s: %s: %w: %w", s.uri, doing, sign.ErrSignerUnavailable, err)
}

// gpg runs a GnuPG program and returns its standard output.
func gpg(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
