package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
)

// Sentinels matched by *APIError with errors.Is.
var (
	ErrConflict     = errors.New("conflict")     // 409: lost compare-and-swap, name or hostname taken
	ErrNotFound     = errors.New("not found")    // 404
	ErrUnauthorized = errors.New("unauthorized") // 401
	ErrForbidden    = errors.New("forbidden")    // 403
	ErrInvalid      = errors.New("invalid")      // 400 and 422: the request or release was refused
	// ErrRolledBack: 409 rolled_back, the release (or one it is built on) was rolled back;
	// APIError.RolledBack says which, when and by whom. It matches ErrConflict too.
	ErrRolledBack = errors.New("rolled back")
	// ErrDowngrade: 409 deleted_release, not_on_active_line or older_release, an
	// activation that would go back without saying so (neither a rollback nor forced).
	// It matches ErrConflict too.
	ErrDowngrade = errors.New("activation would go back")
	// ErrNotModified is returned by Routes when the routes did not change.
	ErrNotModified = errors.New("routes not modified")
)

// APIError is an error answer of controld.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Active is, on a lost compare-and-swap, the release active now ("" for none);
	// HasActive tells whether the server said so.
	Active    string
	HasActive bool
	// RolledBack is, on a refused activation (409 rolled_back), the release that was
	// rolled back.
	RolledBack *api.RolledBack
	// Missing is, on a release refused for objects in the known-missing set that are
	// still gone (422), their digests.
	Missing []string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("controld: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Is matches the sentinel of the error's status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity
	case ErrRolledBack:
		return e.Status == http.StatusConflict && e.Code == api.CodeRolledBack
	case ErrDowngrade:
		return e.Status == http.StatusConflict &&
			(e.Code == api.CodeDeletedRelease || e.Code == api.CodeNotOnActiveLine || e.Code == api.CodeOlderRelease)
	}
	return false
}

// Client talks to controld with one token. It is safe for concurrent use.
//
// It may know several replicas of controld (on one PostgreSQL database): a request that
// gets no answer from one, or an answer 503 (its database is unreachable), goes to the
// next, and the client keeps to the replica that answered. Every request is safe to
// send twice: reads are, and recording and activating are idempotent (an activation
// that took effect before its answer was lost finds its release active).
//
// A replica that accepts connections but does not answer (a frozen process, whose
// kernel still completes handshakes) is given ReadAttempt to answer a read, then the
// next is asked; a write waits for its answer as long as the HTTP client lets it, since
// recording a large release takes time. A push reads first (its token, the repository),
// so it moves past a frozen replica before it records.
type Client struct {
	bases []string
	token string
	http  *http.Client
	cur   atomic.Int64 // index in bases of the replica that answered last
	// readAttempt bounds one replica's answer to a GET when there are several.
	readAttempt time.Duration
}

// ReadAttempt is how long a read waits for one replica's answer before it asks the
// next, when the client knows several. controld answers reads from its database at
// once; only the routes feed's long poll (Routes, not bounded by it) waits on purpose.
const ReadAttempt = 10 * time.Second

// New returns a client of the controld at baseURL (such as "https://controld:7380"), or
// of the replicas at a comma-separated list of URLs, authenticating with token. A nil
// httpClient means http.DefaultClient.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	c := &Client{token: token, http: httpClient, readAttempt: ReadAttempt}
	for _, b := range strings.Split(baseURL, ",") {
		if b = strings.TrimRight(strings.TrimSpace(b), "/"); b != "" {
			c.bases = append(c.bases, b)
		}
	}
	if len(c.bases) == 0 {
		c.bases = []string{""}
	}
	return c
}

// URL returns the base URL of the replica the client talks to now.
func (c *Client) URL() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// do sends a request with an optional JSON body and decodes a 2xx answer into out,
// trying each replica in turn, from the one that answered last, while they do not answer
// or answer 503.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var payload []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		payload = b
	}
	start := int(c.cur.Load())
	var err error
	for i := range c.bases {
		n := (start + i) % len(c.bases)
		var retry bool
		retry, err = c.doOnce(ctx, c.bases[n], method, path, payload, in != nil, out)
		if !retry || ctx.Err() != nil {
			if err == nil || !retry {
				c.cur.Store(int64(n))
			}
			return err
		}
	}
	return err
}

// doOnce sends the request to one replica. retry says whether another replica may
// answer where this one did not.
func (c *Client) doOnce(ctx context.Context, base, method, path string, payload []byte, hasBody bool, out any) (retry bool, err error) {
	var body io.Reader
	if hasBody {
		body = bytes.NewReader(payload)
	}
	if len(c.bases) > 1 {
		defer func() {
			if err != nil {
				err = fmt.Errorf("%s: %w", base, err)
			}
		}()
	}
	if method == http.MethodGet && len(c.bases) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.readAttempt)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return true, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return true, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode == http.StatusServiceUnavailable, decodeError(resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return false, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return false, nil
}

func decodeError(status int, data []byte) *APIError {
	var body api.ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Code == "" {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &APIError{Status: status, Code: "http", Message: msg}
	}
	e := &APIError{Status: status, Code: body.Error.Code, Message: body.Error.Message}
	if body.Error.Active != nil {
		e.Active, e.HasActive = *body.Error.Active, true
	}
	e.RolledBack = body.Error.RolledBack
	e.Missing = body.Error.Missing
	return e
}

func repoPath(repo string, rest ...string) string {
	p := "/v1/repos/" + url.PathEscape(repo)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// CreateRepo creates a repository (admin).
func (c *Client) CreateRepo(ctx context.Context, req api.CreateRepoRequest) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodPost, "/v1/repos", req, &out)
}

// Repo returns one repository.
func (c *Client) Repo(ctx context.Context, repo string) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodGet, repoPath(repo), nil, &out)
}

// Repos lists the repositories the token may read.
func (c *Client) Repos(ctx context.Context) ([]api.Repository, error) {
	var out []api.Repository
	return out, c.do(ctx, http.MethodGet, "/v1/repos", nil, &out)
}

// AddHostnames claims hostnames for a repository (admin).
func (c *Client) AddHostnames(ctx context.Context, repo string, hostnames ...string) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "hostnames"), api.HostnamesRequest{Hostnames: hostnames}, &out)
}

// AddKey registers an armored public key for a repository (admin).
func (c *Client) AddKey(ctx context.Context, repo, armoredKey string) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "keys"), api.KeyRequest{Key: armoredKey}, &out)
}

// RemoveKey unregisters a key by fingerprint (admin).
func (c *Client) RemoveKey(ctx context.Context, repo, fingerprint string) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodDelete, repoPath(repo, "keys", fingerprint), nil, &out)
}

// SetRetention sets a repository's retention window (admin).
func (c *Client) SetRetention(ctx context.Context, repo string, d time.Duration) (*api.Repository, error) {
	var out api.Repository
	return &out, c.do(ctx, http.MethodPut, repoPath(repo, "retention"), api.RetentionRequest{Retention: duration.Duration(d)}, &out)
}

// RecordRelease asks controld to verify and record the manifest object manifestSHA256
// (already in the store). With activate, it is activated in the same transaction if
// expectActive is the active release ("" for none); a lost compare-and-swap records
// nothing and returns an *APIError matching ErrConflict.
func (c *Client) RecordRelease(ctx context.Context, repo, manifestSHA256 string, activate bool, expectActive string) (*api.RecordResponse, error) {
	return c.Record(ctx, repo, api.RecordRequest{Manifest: manifestSHA256, Activate: activate, ExpectActive: expectActive})
}

// Record is RecordRelease with every field of the request, such as Force and Rollback.
// A release refused because it (or one it is built on) was rolled back is an *APIError
// matching ErrRolledBack.
func (c *Client) Record(ctx context.Context, repo string, req api.RecordRequest) (*api.RecordResponse, error) {
	var out api.RecordResponse
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "releases"), req, &out)
}

// Release returns one recorded release.
func (c *Client) Release(ctx context.Context, repo, id string) (*api.Release, error) {
	var out api.Release
	return &out, c.do(ctx, http.MethodGet, repoPath(repo, "releases", id), nil, &out)
}

// Releases lists a repository's releases in the order they were recorded.
func (c *Client) Releases(ctx context.Context, repo string) ([]api.Release, error) {
	var out []api.Release
	return out, c.do(ctx, http.MethodGet, repoPath(repo, "releases"), nil, &out)
}

// Activate makes release id active if expect is the active release ("" for none).
func (c *Client) Activate(ctx context.Context, repo, id, expect string) (*api.Activation, error) {
	return c.ActivateWith(ctx, repo, api.ActivateRequest{Release: id, ExpectActive: expect})
}

// ActivateWith is Activate with every field of the request, such as Force. A release
// refused because it (or one it is built on) was rolled back is an *APIError matching
// ErrRolledBack.
func (c *Client) ActivateWith(ctx context.Context, repo string, req api.ActivateRequest) (*api.Activation, error) {
	var out api.Activation
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "activate"), req, &out)
}

// Rollback makes the previously active release active again if expect is the active
// release now.
func (c *Client) Rollback(ctx context.Context, repo, expect string) (*api.Activation, error) {
	var out api.Activation
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "rollback"), api.RollbackRequest{ExpectActive: expect}, &out)
}

// History lists a repository's activations, oldest first.
func (c *Client) History(ctx context.Context, repo string) ([]api.Activation, error) {
	var out []api.Activation
	return out, c.do(ctx, http.MethodGet, repoPath(repo, "history"), nil, &out)
}

// Status returns a repository's state at a glance.
func (c *Client) Status(ctx context.Context, repo string) (*api.Status, error) {
	var out api.Status
	return &out, c.do(ctx, http.MethodGet, repoPath(repo, "status"), nil, &out)
}

// CreateToken creates a token (admin) and returns it with its secret.
func (c *Client) CreateToken(ctx context.Context, name string, repositories, actions []string) (*api.CreateTokenResponse, error) {
	var out api.CreateTokenResponse
	req := api.CreateTokenRequest{Name: name, Repositories: repositories, Actions: actions}
	return &out, c.do(ctx, http.MethodPost, "/v1/tokens", req, &out)
}

// Token returns the client's own token: its name, repositories and actions (never its
// secret). It changes nothing, and any valid token may ask; an unknown or revoked token
// is an *APIError matching ErrUnauthorized.
func (c *Client) Token(ctx context.Context) (*api.Token, error) {
	var out api.Token
	return &out, c.do(ctx, http.MethodGet, "/v1/token", nil, &out)
}

// Tokens lists the tokens within the caller's scope (admin).
func (c *Client) Tokens(ctx context.Context) ([]api.Token, error) {
	var out []api.Token
	return out, c.do(ctx, http.MethodGet, "/v1/tokens", nil, &out)
}

// RevokeToken revokes a token by name (admin).
func (c *Client) RevokeToken(ctx context.Context, name string) (*api.Token, error) {
	var out api.Token
	return &out, c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(name), nil, &out)
}

// Routes fetches the routes feed. With since > 0 it long-polls: controld answers when
// the routes version differs from since, or after wait with ErrNotModified. The routes
// are validated (api.ParseRoutes).
func (c *Client) Routes(ctx context.Context, since uint64, wait time.Duration) (*api.Routes, error) {
	req, err := api.NewRoutesRequest(ctx, c.URL(), c.token, since, wait)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/routes: %w", err)
	}
	defer resp.Body.Close()
	r, notModified, err := api.ReadRoutes(resp)
	var se *api.StatusError
	switch {
	case notModified:
		return nil, ErrNotModified
	case errors.As(err, &se):
		return nil, decodeError(se.Status, se.Body)
	case err != nil:
		return nil, fmt.Errorf("GET /v1/routes: %w", err)
	}
	return r, nil
}
