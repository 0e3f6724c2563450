package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/armor-apt/armor/internal/duration"
)

// The edges' shared certificate storage: certmagic's Storage and its locks, kept by
// controld in its state database so that every edge behind one name holds the same
// certificate, one edge orders or renews it, and any edge answers the CA's challenge.
// Edges call it with a token that has the certs action on every repository ("*"):
//
//	GET    /v1/certs/files/{key}      the file's bytes (X-Armor-Modified: RFC 3339)
//	PUT    /v1/certs/files/{key}      store the request body at key
//	DELETE /v1/certs/files/{key}      delete key and every key under key/: CertDeleted
//	GET    /v1/certs/list?prefix=P    every file at P or under P/: [CertFileInfo]
//	POST   /v1/certs/locks/{name}     take or renew a lock: CertLockRequest → CertLock,
//	                                  or 409 (code "locked") with the holder's CertLock
//	DELETE /v1/certs/locks/{name}?holder=H   free it; 409 if another holds it
//
// A lock is a lease: it frees itself at Until, so an edge that dies never holds one for
// longer than its TTL.

// ActionCerts lets a token use the certificate storage (edges that serve HTTPS).
const ActionCerts = "certs"

// CodeLocked answers a lock held by another holder (409).
const CodeLocked = "locked"

// HeaderCertModified carries a file's modification time.
const HeaderCertModified = "X-Armor-Modified"

// Bounds of a lock's lease.
const (
	MinCertLockTTL = time.Second
	MaxCertLockTTL = time.Hour
)

// CertFileInfo describes a stored file.
type CertFileInfo struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// CertDeleted answers a deletion.
type CertDeleted struct {
	Deleted int `json:"deleted"`
}

// CertLockRequest takes or renews a lock for Holder (an edge's name for itself, unique
// per process) for TTL.
type CertLockRequest struct {
	Holder string            `json:"holder"`
	TTL    duration.Duration `json:"ttl"`
}

// CertLock is a lock in force.
type CertLock struct {
	Name   string    `json:"name"`
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// CheckCertKey validates a file key or lock name: slash-separated segments of
// printable ASCII, none empty, "." or "..", at most 1024 bytes.
func CheckCertKey(key string) error {
	if key == "" || len(key) > 1024 {
		return errors.New("a key of 1 to 1024 bytes")
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("key %q: empty, '.' or '..' path segment", key)
		}
	}
	for _, r := range key {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("key %q: only printable ASCII without spaces", key)
		}
	}
	return nil
}
