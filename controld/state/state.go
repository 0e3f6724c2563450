package state

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of the Store contract. Implementations wrap them; callers test with errors.Is
// and errors.As.
var (
	// ErrNotFound: no such repository, release or token.
	ErrNotFound = errors.New("not found")
	// ErrExists: a repository or token with that name already exists.
	ErrExists = errors.New("already exists")
	// ErrConflict: the active release is not the one the caller expected. The error is
	// a *ConflictError naming the release active now. Nothing changed.
	ErrConflict = errors.New("active release is not the expected one")
	// ErrHostnameTaken: another repository owns the hostname; the error is a
	// *HostnameTakenError. Nothing changed.
	ErrHostnameTaken = errors.New("hostname belongs to another repository")
	// ErrUnknownParent: a release's parent is not recorded in the repository (or the
	// release has no parent while the repository already has releases).
	ErrUnknownParent = errors.New("parent release is not recorded")
	// ErrNoPrevious: a rollback was asked but no release was active before the current one.
	ErrNoPrevious = errors.New("no previously active release to roll back to")
	// ErrUnavailable: the store cannot be reached now (a database server down or
	// unreachable); nothing changed, and the same call may succeed later.
	ErrUnavailable = errors.New("state store is unavailable")
)

// ConflictError is a lost compare-and-swap on a repository's active pointer.
type ConflictError struct {
	Repository string
	Expected   string // what the caller expected ("" for none)
	Active     string // what is active ("" for none)
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("repository %s: active release is %s, not %s as expected", e.Repository, orNone(e.Active), orNone(e.Expected))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// HostnameTakenError is a hostname claimed by a repository that does not own it.
type HostnameTakenError struct {
	Hostname string
	Owner    string
}

func (e *HostnameTakenError) Error() string {
	return fmt.Sprintf("hostname %s belongs to repository %s", e.Hostname, e.Owner)
}

// Is makes errors.Is(err, ErrHostnameTaken) true.
func (e *HostnameTakenError) Is(target error) bool { return target == ErrHostnameTaken }

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// Repository is one published repository.
type Repository struct {
	Name      string        `json:"name"`
	Hostnames []string      `json:"hostnames"` // normalised, sorted
	Keys      []Key         `json:"keys"`      // in the order they were added
	Retention time.Duration `json:"retention"`
	CreatedAt time.Time     `json:"created_at"`
	CreatedBy string        `json:"created_by"`
	// Active is the active pointer; nil until the first activation.
	Active *Pointer `json:"active,omitempty"`
	// Retired holds, for each release that was once active and is not now, when it was
	// last deactivated; latest first. It is what the retention window is computed from.
	Retired []Retired `json:"retired,omitempty"`
}

// Key is a registered public key.
type Key struct {
	Fingerprint string    `json:"fingerprint"`
	UserIDs     []string  `json:"user_ids"`
	Armored     string    `json:"armored"`
	AddedAt     time.Time `json:"added_at"`
	AddedBy     string    `json:"added_by"`
}

// Pointer is the active release of a repository.
type Pointer struct {
	Release  string    `json:"release"`
	Manifest string    `json:"manifest"`
	At       time.Time `json:"at"`
	By       string    `json:"by"`
}

// Retired is a release that was active until DeactivatedAt.
type Retired struct {
	Release       string    `json:"release"`
	Manifest      string    `json:"manifest"`
	DeactivatedAt time.Time `json:"deactivated_at"`
}

// Release is a recorded release. Seq orders the releases of a repository by recording
// and is set by the store.
type Release struct {
	Repository string    `json:"repository"`
	ID         string    `json:"id"`
	Seq        uint64    `json:"seq"`
	Manifest   string    `json:"manifest"`
	Parent     string    `json:"parent"`
	Date       string    `json:"date"`
	Packages   int       `json:"packages"`
	Files      int       `json:"files"`
	Size       int64     `json:"size"`
	Signer     string    `json:"signer"`
	PushedBy   string    `json:"pushed_by"`
	PushedAt   time.Time `json:"pushed_at"`
	// Suites are the release's verified suites by directory ("dists/stable"): what tells
	// a newer release from an older one. Releases recorded before controld kept them
	// have none.
	Suites map[string]Suite `json:"suites,omitempty"`
}

// Suite is one verified suite of a release.
type Suite struct {
	Date      string `json:"date"`       // its signed Release's Date (RFC 3339, UTC)
	InRelease string `json:"in_release"` // the SHA-256 of its InRelease
}

// Activation is one entry of a repository's history: the pointer moved From → To.
type Activation struct {
	Repository string    `json:"repository"`
	Seq        uint64    `json:"seq"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	Rollback   bool      `json:"rollback"`
}

// Flip asks to move a repository's active pointer to To, only if Expect is active now
// ("" for none). With Rollback and no To, the target is the release that was active
// before the current one (the From of the latest history entry); with Rollback and a To
// (a re-published rollback release), To is activated as a rollback. Either way the
// release it deactivates is marked rolled back (see RollbackMarks). Force activates a
// release that is rolled back, or built on one, and clears those marks.
type Flip struct {
	Repository string
	To         string
	Expect     string
	By         string
	At         time.Time
	Rollback   bool
	Force      bool
}

// Recorded is the outcome of RecordRelease.
type Recorded struct {
	Release    Release
	Created    bool        // false: the release was recorded before; Release is that record
	Activation *Activation // set when a flip was asked and succeeded
}

// Token is an API token, stored by the SHA-256 of its secret.
type Token struct {
	Name         string    `json:"name"`
	Hash         string    `json:"hash"` // hex SHA-256 of the secret
	Repositories []string  `json:"repositories"`
	Actions      []string  `json:"actions"`
	CreatedAt    time.Time `json:"created_at"`
	CreatedBy    string    `json:"created_by"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	RevokedBy    string    `json:"revoked_by,omitempty"`
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// Snapshot is the routes version and every repository, read in one transaction.
type Snapshot struct {
	Version      uint64
	Repositories []Repository // sorted by name
}

// Store is controld's state.
//
// Every method is one atomic, durable transaction: when it returns nil the change
// survives a crash; when it returns an error (or the process dies first) nothing of it
// is visible. Methods are safe for concurrent use, and two concurrent compare-and-swaps
// on one pointer never both succeed. Errors wrap the sentinels above; anything else
// means the store itself failed.
//
// The routes version starts at 1 and grows by one with every change an edge must see:
// a repository created, hostnames added, a key added or removed (edges serve the keys),
// a retention change, a flip, a BumpVersion.
type Store interface {
	Deleter // deleting releases: gc.go
	// CreateRepository adds a repository (ErrExists if the name is taken) and claims
	// its hostnames (*HostnameTakenError if one belongs to another repository).
	CreateRepository(ctx context.Context, r Repository) error
	// Repository returns one repository, or ErrNotFound.
	Repository(ctx context.Context, name string) (Repository, error)
	// Repositories returns every repository, sorted by name.
	Repositories(ctx context.Context) ([]Repository, error)
	// AddHostnames claims normalised hostnames for repo. Hostnames it owns already are
	// ignored; one owned by another repository fails the whole call.
	AddHostnames(ctx context.Context, repo string, hostnames []string) (Repository, error)
	// AddKey registers a public key; a key with the same fingerprint is replaced.
	AddKey(ctx context.Context, repo string, key Key) (Repository, error)
	// RemoveKey unregisters the key with that fingerprint, or returns ErrNotFound.
	RemoveKey(ctx context.Context, repo, fingerprint, by string, at time.Time) (Repository, error)
	// SetRetention sets repo's retention window.
	SetRetention(ctx context.Context, repo string, d time.Duration) (Repository, error)

	// RecordRelease records rel (ErrNotFound for an unknown repository). If a release
	// with that id is recorded already, it returns that record with Created false. A
	// new release's parent must be recorded in the repository, or be empty when the
	// repository has no release yet (ErrUnknownParent). With flip (To is rel.ID), the
	// release is activated in the same transaction; if that compare-and-swap fails,
	// nothing is recorded.
	RecordRelease(ctx context.Context, rel Release, flip *Flip) (Recorded, error)
	// Release returns one recorded release, or ErrNotFound.
	Release(ctx context.Context, repo, id string) (Release, error)
	// Releases returns repo's releases in the order they were recorded.
	Releases(ctx context.Context, repo string) ([]Release, error)
	// Activate performs a compare-and-swap of repo's active pointer (*ConflictError when
	// Expect is not active; ErrNotFound for an unknown release; ErrNoPrevious for a
	// rollback with nothing to go back to; *RolledBackError for a rolled-back release
	// without Force). Activating the release that is already
	// active, as expected, changes nothing and returns the latest history entry.
	Activate(ctx context.Context, f Flip) (Activation, error)
	// History returns repo's activations, oldest first.
	History(ctx context.Context, repo string) ([]Activation, error)
	RollbackMarks
	MissingObjects // objects a store check found gone: missing.go
	Hooks          // webhooks and their deliveries: hooks.go
	CertStorage    // the edges' shared ACME storage and locks: certs.go

	// Version returns the routes version.
	Version(ctx context.Context) (uint64, error)
	// BumpVersion increases the routes version (when something time-driven changed the
	// routes, such as a retention window ending) and returns the new one.
	BumpVersion(ctx context.Context) (uint64, error)
	// Snapshot reads the routes version and all repositories consistently.
	Snapshot(ctx context.Context) (Snapshot, error)

	// CreateToken stores a token (ErrExists if the name or hash is taken).
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash finds a token, revoked or not, by the hash of its secret.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// Tokens returns every token, sorted by name.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks a token revoked (revoking twice keeps the first revocation).
	RevokeToken(ctx context.Context, name, by string, at time.Time) (Token, error)
}
