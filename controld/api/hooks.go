package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/armor-apt/armor/internal/duration"
)

// Webhooks: controld tells URLs of what happened by signed POSTs. The receiving end
// (CDN purgers, chat bots, downstream mirrors) needs only this file: the payload, the
// headers and the signature check.
//
// Every delivery is an HTTP POST with a JSON HookPayload body and these headers:
//
//	Content-Type:          application/json
//	User-Agent:            armor-controld
//	X-Armor-Event:         the event type (record, activate, rollback, gc, key, ping)
//	X-Armor-Delivery:      the delivery's id: the same on each retry of it
//	X-Armor-Hook:          the hook's id
//	X-Armor-Signature-256: sha256=<HMAC-SHA256 of the body with the hook's secret, hex>
//
// The signature is computed over the exact bytes of the body, with the hook's secret
// (as `armor hooks add` printed it, the whole string) as the HMAC key, and written as
// lowercase hex after "sha256=": the scheme of GitHub's X-Hub-Signature-256. A receiver
// recomputes it over the raw body before parsing it, compares in constant time
// (VerifyHook does both), and answers 2xx once it has the event. Anything else (another
// status, no answer within the timeout, a redirect) is retried with exponential backoff.
// Delivery is at least once: a receiver may see a delivery again (the same
// X-Armor-Delivery) and should act idempotently; event_id orders events.

// Event types a hook may ask for.
const (
	EventRecord   = "record"   // a release was recorded
	EventActivate = "activate" // a release was activated (changed_paths lists what changed)
	EventRollback = "rollback" // a release was activated as a rollback
	EventGC       = "gc"       // a garbage collection deleted releases or objects
	EventKey      = "key"      // a public key was added or removed (key rotation)
	EventPing     = "ping"     // a test delivery (armor hooks ping)
)

// HookEvents lists the event types a hook may ask for, in a stable order.
var HookEvents = []string{EventRecord, EventActivate, EventRollback, EventGC, EventKey}

// Headers of a delivery.
const (
	HeaderHookEvent     = "X-Armor-Event"
	HeaderHookDelivery  = "X-Armor-Delivery"
	HeaderHookID        = "X-Armor-Hook"
	HeaderHookSignature = "X-Armor-Signature-256"
)

// MaxChangedPaths bounds HookPayload.ChangedPaths; beyond it the list is cut and
// ChangedPathsTruncated set: purge the whole hostname instead.
const MaxChangedPaths = 2000

// HookPayload is the body of every delivery. Exactly the sections of its event are set.
type HookPayload struct {
	Event   string `json:"event"`
	EventID uint64 `json:"event_id"` // 1, 2, ... over all events, in the order they happened
	Hook    string `json:"hook"`
	// Repository and its hostnames now (empty for gc).
	Repository string    `json:"repository,omitempty"`
	Hostnames  []string  `json:"hostnames,omitempty"`
	At         time.Time `json:"at"`
	By         string    `json:"by"` // the token that made the change
	// RoutesVersion is the version of the routes feed that carries the change to the
	// edges (activate, rollback, key): an edge serving it or a later one has it (edged's
	// /readyz says which it serves).
	RoutesVersion uint64 `json:"routes_version,omitempty"`
	// Release is the release recorded (record) or now active (activate, rollback).
	Release    *Release    `json:"release,omitempty"`
	Activation *Activation `json:"activation,omitempty"`
	// ChangedPaths (activate, rollback) are the tree's paths whose content the
	// activation changed, added or removed, sorted, without by-hash/ paths (named by
	// their content, they never change). A CDN in front purges them, and the
	// directory listings above them.
	ChangedPaths          []string   `json:"changed_paths,omitempty"`
	ChangedPathsTruncated bool       `json:"changed_paths_truncated,omitempty"`
	Key                   *KeyChange `json:"key,omitempty"`
	GC                    *GCSummary `json:"gc,omitempty"`
}

// KeyChange is a key added to or removed from a repository.
type KeyChange struct {
	Action      string   `json:"action"` // "added" or "removed"
	Fingerprint string   `json:"fingerprint"`
	UserIDs     []string `json:"user_ids,omitempty"`
}

// GCSummary is what a garbage collection deleted.
type GCSummary struct {
	Releases     []GCRelease `json:"releases"`
	Objects      int         `json:"objects"`
	Bytes        int64       `json:"bytes"`
	KeptReleases int         `json:"kept_releases"`
}

// SignHook returns the X-Armor-Signature-256 value of body under secret.
func SignHook(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of VerifyHook.
var (
	ErrHookUnsigned     = errors.New("no " + HeaderHookSignature + " header of the form sha256=<hex>")
	ErrHookBadSignature = errors.New("the signature does not match the body: wrong secret, or the body was changed")
)

// VerifyHook checks header, an X-Armor-Signature-256 value, against body and secret in
// constant time.
func VerifyHook(secret string, body []byte, header string) error {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return ErrHookUnsigned
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return ErrHookUnsigned
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrHookBadSignature
	}
	return nil
}

// CreateHookRequest is the body of POST /v1/hooks.
type CreateHookRequest struct {
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	Repositories []string `json:"repositories"` // names, or ["*"]
}

// Hook is a registered webhook; its secret is shown only when it is created.
type Hook struct {
	ID           string    `json:"id"`
	URL          string    `json:"url"`
	Events       []string  `json:"events"`
	Repositories []string  `json:"repositories"`
	CreatedAt    time.Time `json:"created_at"`
	CreatedBy    string    `json:"created_by"`
}

// CreateHookResponse answers POST /v1/hooks.
type CreateHookResponse struct {
	Hook   Hook   `json:"hook"`
	Secret string `json:"secret"`
}

// Delivery is one event's delivery to one hook, with its attempts: the delivery log.
type Delivery struct {
	ID         uint64    `json:"id"`
	Hook       string    `json:"hook"`
	Event      string    `json:"event"`
	EventID    uint64    `json:"event_id"`
	Repository string    `json:"repository,omitempty"`
	State      string    `json:"state"` // pending, delivered or failed
	CreatedAt  time.Time `json:"created_at"`
	// NextAttempt is when a pending delivery is tried next (absent: at once).
	NextAttempt *time.Time        `json:"next_attempt,omitempty"`
	Attempts    []DeliveryAttempt `json:"attempts"`
	// InFlight names the controld process attempting it now, and until when it may.
	InFlight *DeliveryLease `json:"in_flight,omitempty"`
}

// DeliveryAttempt is one try.
type DeliveryAttempt struct {
	At       time.Time         `json:"at"`
	Duration duration.Duration `json:"duration"`
	By       string            `json:"by"` // the controld process (host/pid)
	OK       bool              `json:"ok"`
	Status   int               `json:"status,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// DeliveryLease is a delivery being attempted.
type DeliveryLease struct {
	By    string    `json:"by"`
	Until time.Time `json:"until"`
}
