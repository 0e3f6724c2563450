package state

import (
	"context"
	"strings"
	"time"
)

// CertStorage is where a fleet of edges keeps what ACME gives them (certmagic's storage:
// certificates and their keys, the ACME account, the challenge tokens any edge must be
// able to answer) and the locks that make one edge order a certificate all of them then
// serve. Keys are slash-separated paths, as certmagic writes them; the store treats them
// as opaque strings but for prefixes ("a" is a prefix of "a/b", not of "ab").
//
// A lock is a lease: it is held until a time its holder sets and may push back
// (LockCert again), and it is free once that time has passed, so the lock of an edge
// that died frees itself.
type CertStorage interface {
	// PutCertFile stores value at key, replacing what was there, modified at (kept to
	// the microsecond).
	PutCertFile(ctx context.Context, key string, value []byte, at time.Time) error
	// CertFile returns the file at key (ErrNotFound if none).
	CertFile(ctx context.Context, key string) (CertFile, error)
	// DeleteCertFiles deletes key and every key under key/ and returns how many.
	DeleteCertFiles(ctx context.Context, key string) (int, error)
	// CertFiles lists the files at prefix or under prefix/ ("" lists all), sorted.
	CertFiles(ctx context.Context, prefix string) ([]CertFileInfo, error)
	// LockCert takes or renews the lock name for holder until now+ttl, if it is free,
	// expired (held until now or earlier) or held by holder already; ok says whether
	// it did, and the lock returned is the one now in force.
	LockCert(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (l CertLock, ok bool, err error)
	// UnlockCert frees the lock name if holder holds it; a lock that is free already is
	// no error, one that another holder took (after it expired) is ErrConflict.
	UnlockCert(ctx context.Context, name, holder string) error
}

// CertFile is one file of the edges' certificate storage.
type CertFile struct {
	Key      string    `json:"key"`
	Value    []byte    `json:"value"`
	Modified time.Time `json:"modified"`
}

// CertFileInfo describes a file without its content.
type CertFileInfo struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// CertLock is a lock of the edges' certificate storage.
type CertLock struct {
	Name   string    `json:"name"`
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// UnderKey reports whether file key k is key itself or lies under key/ ("" holds all).
func UnderKey(k, key string) bool {
	return key == "" || k == key || strings.HasPrefix(k, key+"/")
}
