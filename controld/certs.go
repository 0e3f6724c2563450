package controld

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// The edges' shared certificate storage (api/certs.go has the endpoints): a fleet of
// edges behind one name keeps certmagic's files and locks here, in the state database
// every replica shares. The files include the certificates' private keys and the ACME
// account key: only a token with the certs action on "*" reaches them, and the state
// database's backups hold them too.
//
// These requests change nothing edges route by, so they neither wake the routes feed
// nor the webhook dispatcher, and they are logged at debug level: edges renew their
// locks every few seconds while they order.

// allowCerts admits tokens with the certs action on every repository.
func allowCerts(c *call) error {
	if !slices.Contains(c.tok.Repositories, api.AllRepositories) || !slices.Contains(c.tok.Actions, api.ActionCerts) {
		return forbidden("token %s may not use the certificate storage: that takes the %s action on every repository (\"*\"), as an edge serving HTTPS has",
			c.tok.Name, api.ActionCerts)
	}
	return nil
}

// certKeyOf authorises the request and returns its path value wildcard (a file's key,
// a lock's name), validated.
func certKeyOf(c *call, wildcard string) (string, error) {
	if err := allowCerts(c); err != nil {
		return "", err
	}
	key := c.r.PathValue(wildcard)
	if err := api.CheckCertKey(key); err != nil {
		return "", badRequest("certificate storage: %v", err)
	}
	return key, nil
}

func (s *Server) getCertFile(c *call) error {
	key, err := certKeyOf(c, "key")
	if err != nil {
		return err
	}
	f, err := s.st.CertFile(c.ctx(), key)
	if err != nil {
		return err
	}
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.Header().Set("Cache-Control", "no-store")
	c.w.Header().Set(api.HeaderCertModified, f.Modified.UTC().Format(time.RFC3339Nano))
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(f.Value)
	return nil
}

func (s *Server) putCertFile(c *call) error {
	key, err := certKeyOf(c, "key")
	if err != nil {
		return err
	}
	value, err := io.ReadAll(c.r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badRequest("read the file: %v", err)
	}
	if err := s.st.PutCertFile(c.ctx(), key, value, s.now()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteCertFiles(c *call) error {
	key, err := certKeyOf(c, "key")
	if err != nil {
		return err
	}
	n, err := s.st.DeleteCertFiles(c.ctx(), key)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.CertDeleted{Deleted: n})
	return nil
}

func (s *Server) listCertFiles(c *call) error {
	if err := allowCerts(c); err != nil {
		return err
	}
	prefix := c.r.URL.Query().Get("prefix")
	if prefix != "" {
		if err := api.CheckCertKey(prefix); err != nil {
			return badRequest("prefix: %v", err)
		}
	}
	infos, err := s.st.CertFiles(c.ctx(), prefix)
	if err != nil {
		return err
	}
	out := make([]api.CertFileInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, api.CertFileInfo{Key: i.Key, Size: i.Size, Modified: i.Modified})
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) lockCert(c *call) error {
	name, err := certKeyOf(c, "name")
	if err != nil {
		return err
	}
	var req api.CertLockRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := checkHolder(req.Holder); err != nil {
		return err
	}
	if ttl := req.TTL.D(); ttl < api.MinCertLockTTL || ttl > api.MaxCertLockTTL {
		return badRequest("ttl %v: want %v to %v", ttl, api.MinCertLockTTL, api.MaxCertLockTTL)
	}
	l, ok, err := s.st.LockCert(c.ctx(), name, req.Holder, s.now(), req.TTL.D())
	if err != nil {
		return err
	}
	out := api.CertLock{Name: name, Holder: l.Holder, Until: l.Until}
	if !ok {
		return &Error{Status: http.StatusConflict, Code: api.CodeLocked, CertLock: &out,
			Message: fmt.Sprintf("lock %s is held by %s until %s", name, l.Holder, l.Until.UTC().Format(time.RFC3339))}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) unlockCert(c *call) error {
	name, err := certKeyOf(c, "name")
	if err != nil {
		return err
	}
	holder := c.r.URL.Query().Get("holder")
	if err := checkHolder(holder); err != nil {
		return err
	}
	err = s.st.UnlockCert(c.ctx(), name, holder)
	if errors.Is(err, state.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: api.CodeLocked, Message: err.Error(), Err: err}
	}
	if err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkHolder validates a lock holder's name.
func checkHolder(h string) error {
	if h == "" || len(h) > 256 {
		return badRequest("holder: name the lock's holder (1 to 256 bytes)")
	}
	return nil
}
