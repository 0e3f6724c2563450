package controld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// Error is an API error: handlers return it (or a state error, which writeError
// translates) and never write an error response themselves.
type Error struct {
	Status  int
	Code    string
	Message string
	Active  *string // on a lost compare-and-swap: the release active now
	// RolledBack, on a refused activation: the release that was rolled back.
	RolledBack *api.RolledBack
	// Missing, on a release refused for known-missing objects: their digests.
	Missing []string
	// CertLock, on a lock of the certificate storage held by another: that lock.
	CertLock *api.CertLock
	Err      error // the cause, logged but not sent
	// RetryAfter, when set, is sent as Retry-After (whole seconds).
	RetryAfter time.Duration
}

// stateRetryAfter is the Retry-After of a 503 while the state database is unreachable.
const stateRetryAfter = 5 * time.Second

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

func apiErrorf(status int, code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Status: status, Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

func badRequest(format string, args ...any) *Error {
	return apiErrorf(http.StatusBadRequest, api.CodeBadRequest, format, args...)
}

func forbidden(format string, args ...any) *Error {
	return apiErrorf(http.StatusForbidden, api.CodeForbidden, format, args...)
}

func invalidRelease(format string, args ...any) *Error {
	return apiErrorf(http.StatusUnprocessableEntity, api.CodeInvalidRelease, format, args...)
}

func storeFailed(format string, args ...any) *Error {
	return apiErrorf(http.StatusBadGateway, api.CodeStore, format, args...)
}

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized,
	Message: "missing, unknown or revoked token: send Authorization: Bearer <token>"}

// toAPIError classifies any error a handler returns.
func toAPIError(err error) *Error {
	var e *Error
	var conflict *state.ConflictError
	var tooBig *http.MaxBytesError
	var rolledBack *state.RolledBackError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &rolledBack):
		rb := toAPIRolledBack(rolledBack.RolledBack)
		return &Error{Status: http.StatusConflict, Code: api.CodeRolledBack, Message: err.Error(), RolledBack: &rb, Err: err}
	case errors.As(err, &conflict):
		active := conflict.Active
		return &Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: err.Error(), Active: &active, Err: err}
	case errors.As(err, &tooBig):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body is over %d bytes", tooBig.Limit), Err: err}
	case errors.Is(err, state.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: err.Error(), Err: err}
	case errors.Is(err, state.ErrExists), errors.Is(err, state.ErrHostnameTaken), errors.Is(err, state.ErrNoPrevious):
		return &Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: err.Error(), Err: err}
	case errors.Is(err, state.ErrUnknownParent):
		return &Error{Status: http.StatusUnprocessableEntity, Code: api.CodeInvalidRelease,
			Message: err.Error() + ": build from the manifest of a recorded release", Err: err}
	case errors.Is(err, state.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
			Message: "the state database is unavailable; retry later", RetryAfter: stateRetryAfter, Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: "request cancelled", Err: err}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: "internal error (see the controld log)", Err: err}
	}
}

// writeError is the one place that turns an error into a status and a JSON body.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	e := toAPIError(err)
	if e.Status >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Round(time.Second)/time.Second)))
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="controld"`)
	}
	writeJSON(w, e.Status, api.ErrorBody{Error: api.Error{Code: e.Code, Message: e.Message, Active: e.Active, RolledBack: e.RolledBack, Missing: e.Missing, Lock: e.CertLock}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}
