package api

import "time"

// Problems of a MissingObject, as armor store check names them.
const (
	ObjectMissing = "missing"       // the store lacks the object
	ObjectSize    = "size_mismatch" // the store holds it with another size
	ObjectHash    = "hash_mismatch" // the store holds other bytes under its name
)

// ObjectRef names an object of the store: its SHA-256 and its size as the releases list
// it (-1 when no release records it, as for a manifest object).
type ObjectRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// MissingReportRequest is the body of POST /v1/repos/{repo}/missing: objects of the
// repository's releases that a store check found missing from the store or damaged
// there. controld checks each again itself before it believes it.
type MissingReportRequest struct {
	Objects []ObjectRef `json:"objects"`
}

// MissingObject is one object of a repository's known-missing set: controld takes it
// as gone, even when the active release uses it, until a check finds it present again.
type MissingObject struct {
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	Problem string    `json:"problem"` // one of the Object* problems
	FoundAt time.Time `json:"found_at"`
	FoundBy string    `json:"found_by"` // the token whose report controld confirmed
}

// MissingReportResponse answers a MissingReportRequest: the reported objects controld
// found gone too (now in the set), those it found present and intact (now out of it),
// and the repository's whole set after the report.
type MissingReportResponse struct {
	Confirmed []MissingObject `json:"confirmed"`
	Present   []string        `json:"present"`
	Missing   []MissingObject `json:"missing"`
}
