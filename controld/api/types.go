package api

import (
	"time"

	"github.com/armor-apt/armor/internal/duration"
)

// Actions a token can be granted. Any action on a repository implies read on it.
const (
	ActionRead     = "read"     // repositories, releases, history, status, routes
	ActionPush     = "push"     // record releases
	ActionActivate = "activate" // activate and roll back
	ActionAdmin    = "admin"    // create repositories, hostnames, keys, retention, tokens
	// ActionCerts (certs.go): the edges' shared certificate storage, on "*" only.
)

// Actions lists every action, in a stable order.
var Actions = []string{ActionRead, ActionPush, ActionActivate, ActionAdmin, ActionCerts}

// AllRepositories, as a token's only repository, scopes it to every repository,
// including those created later.
const AllRepositories = "*"

// DefaultRetention is how long a deactivated release stays served for by-hash and pool
// paths, unless the repository sets its own window.
const DefaultRetention = 48 * time.Hour

// Key is a public OpenPGP key registered for a repository. An InRelease signed by any
// registered key is accepted, so a new key can be added before the old one is removed.
type Key struct {
	Fingerprint string    `json:"fingerprint"` // primary key, 40 uppercase hex digits
	UserIDs     []string  `json:"user_ids"`
	Armored     string    `json:"armored"`
	AddedAt     time.Time `json:"added_at"`
	AddedBy     string    `json:"added_by"`
}

// Pointer is a repository's active release.
type Pointer struct {
	Release     string    `json:"release"`
	Manifest    string    `json:"manifest"`
	ActivatedAt time.Time `json:"activated_at"`
	ActivatedBy string    `json:"activated_by"`
}

// Repository is one published APT repository.
type Repository struct {
	Name      string            `json:"name"`
	Hostnames []string          `json:"hostnames"`
	Keys      []Key             `json:"keys"`
	Retention duration.Duration `json:"retention"`
	CreatedAt time.Time         `json:"created_at"`
	CreatedBy string            `json:"created_by"`
	Active    *Pointer          `json:"active"` // null until a release is first activated
}

// CreateRepoRequest is the body of POST /v1/repos.
type CreateRepoRequest struct {
	Name      string             `json:"name"`
	Hostnames []string           `json:"hostnames,omitempty"`
	Keys      []string           `json:"keys,omitempty"`      // armored public keys
	Retention *duration.Duration `json:"retention,omitempty"` // default 48h (or the server's)
}

// HostnamesRequest is the body of POST /v1/repos/{repo}/hostnames.
type HostnamesRequest struct {
	Hostnames []string `json:"hostnames"`
}

// KeyRequest is the body of POST /v1/repos/{repo}/keys.
type KeyRequest struct {
	Key string `json:"key"` // armored public key
}

// RetentionRequest is the body of PUT /v1/repos/{repo}/retention.
type RetentionRequest struct {
	Retention duration.Duration `json:"retention"`
}

// Release is a recorded release: a verified manifest, immutable once recorded.
type Release struct {
	Repository string    `json:"repository"`
	ID         string    `json:"id"`       // the manifest's id
	Manifest   string    `json:"manifest"` // sha256 of the manifest object in the store
	Parent     string    `json:"parent"`
	Date       string    `json:"date"` // the manifest's build date
	Packages   int       `json:"packages"`
	Files      int       `json:"files"`
	Size       int64     `json:"size"`   // bytes of the release's distinct objects
	Signer     string    `json:"signer"` // fingerprint of the key that signed InRelease
	PushedBy   string    `json:"pushed_by"`
	PushedAt   time.Time `json:"pushed_at"`
	// RolledBack is set while the release is rolled back: activating it, or a release
	// built on it, needs "force".
	RolledBack *RolledBack `json:"rolled_back,omitempty"`
}

// RolledBack says that a rollback deactivated a release, when, by whom, and what it
// activated in its place.
type RolledBack struct {
	Release    string    `json:"release"`
	ReplacedBy string    `json:"replaced_by"`
	At         time.Time `json:"at"`
	By         string    `json:"by"` // token name
}

// RecordRequest is the body of POST /v1/repos/{repo}/releases. Manifest is the sha256 of
// the manifest object, already uploaded to the store. With Activate, the release is also
// activated in the same transaction, if ExpectActive is still the active release ("" for
// none); otherwise nothing is recorded and the answer is 409. Rollback (with Activate)
// says the release re-publishes an older one in place of the active release, which is
// then marked rolled back. Force (with Activate) activates even a release that is rolled
// back or built on one (otherwise 409 rolled_back), and clears those marks.
type RecordRequest struct {
	Manifest     string `json:"manifest"`
	Activate     bool   `json:"activate,omitempty"`
	ExpectActive string `json:"expect_active,omitempty"`
	Rollback     bool   `json:"rollback,omitempty"`
	Force        bool   `json:"force,omitempty"`
}

// RecordResponse answers a RecordRequest. Created is false when the release had been
// recorded before (the record is the original one).
type RecordResponse struct {
	Release    Release     `json:"release"`
	Created    bool        `json:"created"`
	Activation *Activation `json:"activation,omitempty"`
}

// ActivateRequest is the body of POST /v1/repos/{repo}/activate: make Release active if
// ExpectActive is the active release now ("" for none). A release that is rolled back,
// or built on one, is refused (409 rolled_back) unless Force, which clears those marks.
// Activating an ancestor of the active release rolls back what it skips.
type ActivateRequest struct {
	Release      string `json:"release"`
	ExpectActive string `json:"expect_active"`
	Force        bool   `json:"force,omitempty"`
}

// RollbackRequest is the body of POST /v1/repos/{repo}/rollback: make the previously
// active release active again, if ExpectActive is the active release now. The release it
// deactivates is marked rolled back. When the previous release is itself rolled back,
// the answer is 409 rolled_back unless Force.
type RollbackRequest struct {
	ExpectActive string `json:"expect_active"`
	Force        bool   `json:"force,omitempty"`
}

// Activation is one flip of a repository's active pointer, as kept in its history.
type Activation struct {
	Repository string    `json:"repository"`
	Seq        uint64    `json:"seq"`  // 1, 2, ... within the repository
	From       string    `json:"from"` // "" for the first activation
	To         string    `json:"to"`
	By         string    `json:"by"` // token name
	At         time.Time `json:"at"`
	Rollback   bool      `json:"rollback"`
}

// Retained is a release that is no longer active but still served for by-hash and pool
// paths until Until (its deactivation plus the repository's retention window).
type Retained struct {
	ID       string    `json:"id"`
	Manifest string    `json:"manifest"`
	Until    time.Time `json:"until"`
	// DeactivatedAt is when the release last stopped being active (Until less the
	// retention window). Edges use it to date their paths safely (zero from a controld
	// that does not send it).
	DeactivatedAt time.Time `json:"deactivated_at,omitzero"`
}

// Status is a repository's state at a glance (GET /v1/repos/{repo}/status).
type Status struct {
	Repository    string     `json:"repository"`
	Hostnames     []string   `json:"hostnames"`
	Active        *Pointer   `json:"active"`
	Previous      string     `json:"previous"` // what a rollback would activate; "" if none
	Retained      []Retained `json:"retained"`
	Releases      int        `json:"releases"`
	Latest        *Release   `json:"latest"` // the most recently recorded release
	RoutesVersion uint64     `json:"routes_version"`
	// PreviousRolledBack is set when Previous was rolled back: a rollback onto it is
	// refused unless forced.
	PreviousRolledBack *RolledBack `json:"previous_rolled_back,omitempty"`
}

// Token describes an API token. The secret itself is shown once, at creation.
type Token struct {
	Name         string     `json:"name"`
	Repositories []string   `json:"repositories"` // or ["*"]
	Actions      []string   `json:"actions"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
	RevokedBy    string     `json:"revoked_by,omitempty"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Name         string   `json:"name"`
	Repositories []string `json:"repositories"`
	Actions      []string `json:"actions"`
}

// CreateTokenResponse carries the new token's secret: it is not stored and cannot be
// shown again.
type CreateTokenResponse struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret"`
}

// Error codes in ErrorBody.
const (
	CodeBadRequest     = "bad_request"       // 400: malformed body, unknown field, bad value
	CodeUnauthorized   = "unauthorized"      // 401: no token, unknown or revoked token
	CodeForbidden      = "forbidden"         // 403: the token lacks the action or repository
	CodeNotFound       = "not_found"         // 404
	CodeConflict       = "conflict"          // 409: CAS lost, name or hostname taken
	CodeRolledBack     = "rolled_back"       // 409: the release, or one it is built on, was rolled back
	CodeTooLarge       = "too_large"         // 413: body over the limit
	CodeInvalidRelease = "invalid_release"   // 422: the release failed verification
	CodeInternal       = "internal"          // 500
	CodeStore          = "store_unavailable" // 502: the object store could not answer
	CodeUnavailable    = "unavailable"       // 503: shutting down, or the state database is unreachable (Retry-After)
)

// Error codes of a refused activation (409) that would go back without saying so: it is
// neither a rollback nor forced, and the release was deleted, is not built on the active
// release, or has a suite older (by its signed Release's Date) than the active release's.
const (
	CodeDeletedRelease  = "deleted_release"
	CodeNotOnActiveLine = "not_on_active_line"
	CodeOlderRelease    = "older_release"
)

// Error is the body of every error answer, inside ErrorBody.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Active is set on a lost compare-and-swap (409): the release active now ("" for
	// none), so the caller can decide what to do without another request.
	Active *string `json:"active,omitempty"`
	// RolledBack is set on a 409 rolled_back: the release that was rolled back (the one
	// to activate, or one it is built on).
	RolledBack *RolledBack `json:"rolled_back,omitempty"`
	// Missing is set on a 422 that refuses a release because objects it lists are in
	// the repository's known-missing set and still gone: their SHA-256s, sorted.
	Missing []string `json:"missing,omitempty"`
	// Lock is set on a 409 locked: the certificate storage lock in force (certs.go).
	Lock *CertLock `json:"lock,omitempty"`
}

// ErrorBody is what every non-2xx answer carries: {"error": {...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}
