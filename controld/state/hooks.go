package state

import (
	"context"
	"slices"
	"time"
)

// Webhooks. The store keeps the hooks (a URL, the events it wants, the repositories it
// covers, its signing secret) and an outbox: one delivery of each event to each hook that
// wants it. controld's API manages the hooks; package controld/hooks makes the deliveries.
//
// The deliveries of an event are created in the transaction that makes the change the
// event tells of (RecordRelease, Activate, AddKey, RemoveKey), or alone for a change that
// is no single transaction (AppendEvent: a garbage collection). So a change that
// committed has its deliveries, and one that did not has none, whatever crashes.
//
// Any process sharing the store may make a delivery: ClaimDeliveries leases due ones to
// one caller until a deadline, and only the holder of the lease's token may record the
// attempt (FinishDelivery). A caller that dies leaves its lease to expire; the delivery
// is claimed again. A delivery is therefore made at least once, by one process at a
// time, never once per process.

// Event types, as hooks name them.
const (
	EventRecord   = "record"   // a release was recorded
	EventActivate = "activate" // a release was activated (not as a rollback)
	EventRollback = "rollback" // a release was activated as a rollback
	EventGC       = "gc"       // a garbage collection deleted releases or objects
	EventKey      = "key"      // a public key was added or removed (key rotation)
	EventPing     = "ping"     // a test delivery to one hook, on request
)

// EventTypes lists the event types a hook may ask for, in a stable order.
var EventTypes = []string{EventRecord, EventActivate, EventRollback, EventGC, EventKey}

// Delivery states.
const (
	DeliveryPending   = "pending"   // due at NextAt, or being attempted under a lease
	DeliveryDelivered = "delivered" // an attempt got a 2xx answer
	DeliveryFailed    = "failed"    // every attempt failed: no more are made
)

// Event is something that happened that hooks may be told of. Exactly the field of its
// type is set (Release for record, Activation and Release for activate and rollback,
// Key, GC).
type Event struct {
	// Seq numbers events 1, 2, ... over the whole store, in commit order; the store sets
	// it. Receivers may order and deduplicate by it.
	Seq        uint64    `json:"seq"`
	Type       string    `json:"type"`
	Repository string    `json:"repository,omitempty"` // "" for gc
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	// RoutesVersion is the routes version that carries the change to the edges
	// (activate, rollback, key); the store sets it.
	RoutesVersion uint64      `json:"routes_version,omitempty"`
	Release       *Release    `json:"release,omitempty"`
	Activation    *Activation `json:"activation,omitempty"`
	Key           *KeyChange  `json:"key,omitempty"`
	GC            *GCSummary  `json:"gc,omitempty"`
	// Hook, for a ping, is the one hook it goes to.
	Hook string `json:"hook,omitempty"`
}

// KeyChange is a key added to or removed from a repository.
type KeyChange struct {
	Action      string   `json:"action"` // "added" or "removed"
	Fingerprint string   `json:"fingerprint"`
	UserIDs     []string `json:"user_ids,omitempty"`
}

// Key change actions.
const (
	KeyAdded   = "added"
	KeyRemoved = "removed"
)

// GCSummary is what a garbage collection deleted.
type GCSummary struct {
	Releases     []ReleaseRef `json:"releases"`
	Objects      int          `json:"objects"`
	Bytes        int64        `json:"bytes"`
	KeptReleases int          `json:"kept_releases"`
}

// ReleaseRef names a release (and its manifest, and when it was pushed).
type ReleaseRef struct {
	Repository string    `json:"repository"`
	ID         string    `json:"id"`
	Manifest   string    `json:"manifest"`
	PushedAt   time.Time `json:"pushed_at"`
}

// Hook is a registered webhook.
type Hook struct {
	ID           string    `json:"id"`
	URL          string    `json:"url"`
	Events       []string  `json:"events"`       // sorted EventTypes
	Repositories []string  `json:"repositories"` // names, or "*" alone for every one
	Secret       string    `json:"secret"`       // the HMAC key its deliveries are signed with
	CreatedAt    time.Time `json:"created_at"`
	CreatedBy    string    `json:"created_by"`
}

// Wants reports whether h is told of ev: a ping goes to its own hook only; a gc, which
// concerns every repository, to hooks of all repositories ("*") only; anything else to
// the hooks that name its type and cover its repository.
func (h Hook) Wants(ev Event) bool {
	if ev.Type == EventPing {
		return ev.Hook == h.ID
	}
	if !slices.Contains(h.Events, ev.Type) {
		return false
	}
	all := slices.Contains(h.Repositories, "*")
	if ev.Repository == "" {
		return all
	}
	return all || slices.Contains(h.Repositories, ev.Repository)
}

// Delivery is one event on its way to one hook, with the log of its attempts.
type Delivery struct {
	ID        uint64    `json:"id"` // set by the store: 1, 2, ...
	Hook      string    `json:"hook"`
	Event     Event     `json:"event"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	// NextAt is when a pending delivery is due; zero (a new one) is at once.
	NextAt   time.Time `json:"next_at,omitzero"`
	Attempts []Attempt `json:"attempts,omitempty"` // oldest first
	// Lease is set while a process attempts it (until Lease.Until).
	Lease *Lease `json:"lease,omitempty"`
}

// Lease is a claim on a delivery.
type Lease struct {
	By    string    `json:"by"` // the process, as it named itself
	Until time.Time `json:"until"`
	Token string    `json:"token"` // FinishDelivery's proof of holding it
}

// Attempt is one try at a delivery.
type Attempt struct {
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration"`
	By       string        `json:"by"`
	OK       bool          `json:"ok"`               // the receiver answered 2xx
	Status   int           `json:"status,omitempty"` // the HTTP status, 0 without an answer
	Error    string        `json:"error,omitempty"`
}

// Claim asks ClaimDeliveries for up to Limit pending deliveries due at Now (NextAt not
// after it) and not leased (or with a lease that ended), leasing each to By until
// Now+Lease, oldest due first.
type Claim struct {
	By    string
	Now   time.Time
	Lease time.Duration
	Limit int
}

// DeliveryQuery selects deliveries for the log: those of Hook ("" for every hook),
// newest first, at most Limit (0: 100).
type DeliveryQuery struct {
	Hook  string
	Limit int
}

// Hooks is the webhook part of the store.
type Hooks interface {
	// CreateHook registers h (ErrExists if its ID is taken).
	CreateHook(ctx context.Context, h Hook) error
	// Hooks returns every hook, sorted by ID.
	Hooks(ctx context.Context) ([]Hook, error)
	// DeleteHook removes a hook and every delivery to it (ErrNotFound if unknown).
	DeleteHook(ctx context.Context, id string) (Hook, error)
	// AppendEvent numbers ev and creates its deliveries, in one transaction of its own;
	// it returns the event as stored and how many deliveries it made.
	AppendEvent(ctx context.Context, ev Event, at time.Time) (Event, int, error)
	// ClaimDeliveries leases due deliveries (see Claim). Each returned delivery carries
	// its new Lease.
	ClaimDeliveries(ctx context.Context, c Claim) ([]Delivery, error)
	// FinishDelivery records attempt a of delivery id and ends the lease whose token is
	// given: the delivery is delivered if a.OK, else pending again at retry, or failed
	// when retry is zero. A token that does not hold the lease any more (it ended and
	// another process claimed the delivery) is ErrConflict, and nothing changes; an
	// unknown delivery (its hook was deleted) is ErrNotFound.
	FinishDelivery(ctx context.Context, id uint64, token string, a Attempt, retry time.Time) (Delivery, error)
	// Deliveries returns deliveries for the log (see DeliveryQuery).
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// Delivery returns one delivery (ErrNotFound if unknown).
	Delivery(ctx context.Context, id uint64) (Delivery, error)
	// Redeliver makes a delivered or failed delivery pending again, due at, keeping
	// its log (ErrNotFound if unknown; a pending one is left as it is).
	Redeliver(ctx context.Context, id uint64, at time.Time) (Delivery, error)
	// PruneDeliveries deletes the delivered and failed deliveries created before
	// before, and returns how many.
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// Finish returns d after attempt a, retrying at retry (see FinishDelivery): the one
// rule every store applies.
func (d Delivery) Finish(a Attempt, retry time.Time) Delivery {
	d.Attempts = append(d.Attempts, a)
	d.Lease = nil
	switch {
	case a.OK:
		d.State = DeliveryDelivered
	case retry.IsZero():
		d.State = DeliveryFailed
	default:
		d.State, d.NextAt = DeliveryPending, retry
	}
	return d
}

// Due reports whether ClaimDeliveries may lease d at now.
func (d Delivery) Due(now time.Time) bool {
	return d.State == DeliveryPending && !d.NextAt.After(now) && (d.Lease == nil || !d.Lease.Until.After(now))
}

// ActivationEvent is the event of activation a, of release rel, carried by routes
// version v.
func ActivationEvent(a Activation, rel Release, v uint64) Event {
	typ := EventActivate
	if a.Rollback {
		typ = EventRollback
	}
	return Event{Type: typ, Repository: a.Repository, At: a.At, By: a.By, RoutesVersion: v, Activation: &a, Release: &rel}
}

// KeyEvent is the event of key k added to or removed from repo (action).
func KeyEvent(repo, action string, k Key, by string, at time.Time) Event {
	return Event{Type: EventKey, Repository: repo, At: at, By: by,
		Key: &KeyChange{Action: action, Fingerprint: k.Fingerprint, UserIDs: k.UserIDs}}
}

// Fanout returns the deliveries of ev to the hooks that want it, created at.
func Fanout(ev Event, hooks []Hook, at time.Time) []Delivery {
	var out []Delivery
	for _, h := range hooks {
		if h.Wants(ev) {
			out = append(out, Delivery{Hook: h.ID, Event: ev, State: DeliveryPending, CreatedAt: at})
		}
	}
	return out
}
