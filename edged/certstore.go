package edged

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
)

// sharedStorage is certmagic's Storage for a fleet of edges behind one name
// (acme_storage = "controld"): files and locks in controld's certificate storage
// (controld/api/certs.go), which every edge reaches already. So every edge serves the
// certificate one of them obtained; one edge orders or renews it, the others wait on
// its lock and then find it in storage; and the challenge tokens the ordering edge
// writes are there for whichever edge the CA's validation reaches (certmagic's
// distributed solver reads them).
//
// Each file is also written to a local copy under state_dir/acme, read when controld
// does not answer: an edge restarted while controld is down still serves HTTPS with the
// certificates it had.
//
// A lock is a lease of lockTTL that the holding process renews every third of it while
// it lives; an edge that dies holds its locks for at most lockTTL, then another edge
// takes over the order. certmagic's own lease requests (RenewLockLease, sized for its
// retries) are answered by renewing that same short lease: the keep-alive, not a long
// lease, is what keeps a living holder's lock.
type sharedStorage struct {
	e       *Edge
	local   *certmagic.FileStorage
	holder  string
	lockTTL time.Duration
	logger  *slog.Logger

	mu   sync.Mutex
	held map[string]context.CancelFunc // lock name → stops its keep-alive
}

var (
	_ certmagic.Storage          = (*sharedStorage)(nil)
	_ certmagic.TryLocker        = (*sharedStorage)(nil)
	_ certmagic.LockLeaseRenewer = (*sharedStorage)(nil)
)

// certRequestTimeout bounds one request to controld's certificate storage.
const certRequestTimeout = 15 * time.Second

// errCertLocked is a lock another holder has.
var errCertLocked = errors.New("held by another edge")

func newSharedStorage(e *Edge, localDir string) (*sharedStorage, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lock holder name: %w", err)
	}
	host, _ := os.Hostname()
	return &sharedStorage{
		e: e, local: &certmagic.FileStorage{Path: localDir}, lockTTL: e.cfg.ACMELockTTL.D(), logger: e.logger,
		holder: host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b),
		held:   map[string]context.CancelFunc{},
	}, nil
}

func (s *sharedStorage) String() string {
	return "controld's certificate storage (" + s.e.cfg.Controld + ")"
}

// unavailable is an error that says controld did not answer (rather than answered no).
type unavailable struct{ err error }

func (u *unavailable) Error() string { return u.err.Error() }
func (u *unavailable) Unwrap() error { return u.err }

// do sends one request to controld's certificate storage, trying each replica in turn
// while they do not answer or answer 5xx, and returns the answer's status and body.
func (s *sharedStorage) do(ctx context.Context, method, p string, q url.Values, body []byte) (int, []byte, error) {
	replicas := controldURLs(s.e.cfg.Controld)
	start := int(s.e.replica.Load())
	var last error
	for i := range replicas {
		base := replicas[(start+i)%len(replicas)]
		status, data, err := s.once(ctx, base, method, p, q, body)
		if err == nil && status < 500 {
			return status, data, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s: HTTP %d: %s", method, base, status, bytes.TrimSpace(data))
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return 0, nil, &unavailable{fmt.Errorf("certificate storage: %w", last)}
}

func (s *sharedStorage) once(ctx context.Context, base, method, p string, q url.Values, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, certRequestTimeout)
	defer cancel()
	u := strings.TrimSuffix(base, "/") + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.e.token)
	resp, err := s.e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, data, err
}

// escapeKey makes a key a URL path, segment by segment.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// apiError turns a refused request into an error naming what controld said.
func apiError(what string, status int, data []byte) error {
	var body api.ErrorBody
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg += ": the edge's token needs the certs action on '*' (acme_storage = \"controld\")"
	}
	return fmt.Errorf("certificate storage: %s: HTTP %d: %s", what, status, msg)
}

// Store writes value at key in controld, then in the local copy.
func (s *sharedStorage) Store(ctx context.Context, key string, value []byte) error {
	status, data, err := s.do(ctx, http.MethodPut, "/v1/certs/files/"+escapeKey(key), nil, value)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return apiError("store "+key, status, data)
	}
	if err := s.local.Store(ctx, key, value); err != nil {
		s.logger.Warn("local copy of a shared certificate file not written", "key", key, "err", err)
	}
	return nil
}

// Load reads key from controld, or from the local copy while controld does not answer.
func (s *sharedStorage) Load(ctx context.Context, key string) ([]byte, error) {
	status, data, err := s.do(ctx, http.MethodGet, "/v1/certs/files/"+escapeKey(key), nil, nil)
	switch {
	case err != nil:
		if v, lerr := s.local.Load(ctx, key); lerr == nil {
			return v, nil
		}
		return nil, err
	case status == http.StatusNotFound:
		return nil, fmt.Errorf("certificate storage: %s: %w", key, fs.ErrNotExist)
	case status != http.StatusOK:
		return nil, apiError("load "+key, status, data)
	}
	if lerr := s.syncLocal(ctx, key, data); lerr != nil {
		s.logger.Debug("local copy of a shared certificate file not refreshed", "key", key, "err", lerr)
	}
	return data, nil
}

// syncLocal keeps the local copy of key equal to data.
func (s *sharedStorage) syncLocal(ctx context.Context, key string, data []byte) error {
	if cur, err := s.local.Load(ctx, key); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	return s.local.Store(ctx, key, data)
}

// Delete deletes key and everything under it, in controld and in the local copy.
func (s *sharedStorage) Delete(ctx context.Context, key string) error {
	status, data, err := s.do(ctx, http.MethodDelete, "/v1/certs/files/"+escapeKey(key), nil, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError("delete "+key, status, data)
	}
	if err := s.local.Delete(ctx, key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Warn("local copy of a shared certificate file not deleted", "key", key, "err", err)
	}
	return nil
}

// files lists the files at prefix or under it, from controld.
func (s *sharedStorage) files(ctx context.Context, prefix string) ([]api.CertFileInfo, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	status, data, err := s.do(ctx, http.MethodGet, "/v1/certs/list", q, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, apiError("list "+prefix, status, data)
	}
	var out []api.CertFileInfo
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("certificate storage: list %s: %w", prefix, err)
	}
	return out, nil
}

// Exists reports whether key is a file or has files under it.
func (s *sharedStorage) Exists(ctx context.Context, key string) bool {
	files, err := s.files(ctx, key)
	if err != nil {
		return s.local.Exists(ctx, key)
	}
	return len(files) > 0
}

// List lists what is under prefix as FileStorage does: recursive, every file and
// directory below it; otherwise its immediate children.
func (s *sharedStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	files, err := s.files(ctx, prefix)
	if err != nil {
		var u *unavailable
		if errors.As(err, &u) {
			return s.local.List(ctx, prefix, recursive)
		}
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	isFile := false
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Key, prefix+"/")
		if prefix == "" {
			rest, ok = f.Key, true
		}
		if !ok {
			isFile = true // prefix itself is a file: nothing under it
			continue
		}
		segs := strings.Split(rest, "/")
		if !recursive {
			segs = segs[:1]
		}
		for i := range segs {
			k := path.Join(prefix, path.Join(segs[:i+1]...))
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	if len(out) == 0 && !isFile {
		return nil, fmt.Errorf("certificate storage: %s: %w", prefix, fs.ErrNotExist)
	}
	slices.Sort(out)
	return out, nil
}

// Stat describes key: a file, or a directory when files lie under it.
func (s *sharedStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	files, err := s.files(ctx, key)
	if err != nil {
		var u *unavailable
		if errors.As(err, &u) {
			return s.local.Stat(ctx, key)
		}
		return certmagic.KeyInfo{}, err
	}
	for _, f := range files {
		if f.Key == key {
			return certmagic.KeyInfo{Key: key, Modified: f.Modified, Size: f.Size, IsTerminal: true}, nil
		}
	}
	if len(files) > 0 {
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, fmt.Errorf("certificate storage: %s: %w", key, fs.ErrNotExist)
}

// lockOnce asks controld for the lock name once: nil when held, errCertLocked when
// another holds it (with when its lease ends).
func (s *sharedStorage) lockOnce(ctx context.Context, name string) (time.Time, error) {
	body, _ := json.Marshal(api.CertLockRequest{Holder: s.holder, TTL: duration.Duration(s.lockTTL)})
	status, data, err := s.do(ctx, http.MethodPost, "/v1/certs/locks/"+escapeKey(name), nil, body)
	if err != nil {
		return time.Time{}, err
	}
	switch status {
	case http.StatusOK:
		return time.Time{}, nil
	case http.StatusConflict:
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Lock != nil {
			return eb.Error.Lock.Until, errCertLocked
		}
		return time.Time{}, errCertLocked
	}
	return time.Time{}, apiError("lock "+name, status, data)
}

// Lock waits until this process holds name, then keeps the lock alive until Unlock.
func (s *sharedStorage) Lock(ctx context.Context, name string) error {
	wait := 200 * time.Millisecond
	for {
		until, err := s.lockOnce(ctx, name)
		if err == nil {
			s.keepAlive(name)
			return nil
		}
		var u *unavailable
		if !errors.Is(err, errCertLocked) && !errors.As(err, &u) {
			return err
		}
		// Held by another (its lease may end sooner than its holder frees it), or
		// controld does not answer: ask again soon.
		d := min(wait, time.Second)
		if left := time.Until(until); errors.Is(err, errCertLocked) && left > 0 && left < d {
			d = left + 10*time.Millisecond
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("certificate storage: lock %s: %w", name, ctx.Err())
		case <-time.After(d):
		}
		wait *= 2
	}
}

// TryLock takes name if it is free now.
func (s *sharedStorage) TryLock(ctx context.Context, name string) (bool, error) {
	_, err := s.lockOnce(ctx, name)
	switch {
	case err == nil:
		s.keepAlive(name)
		return true, nil
	case errors.Is(err, errCertLocked):
		return false, nil
	}
	return false, err
}

// keepAlive renews the lease on name every third of lockTTL until Unlock.
func (s *sharedStorage) keepAlive(name string) {
	ctx, cancel := context.WithCancel(s.e.base)
	s.mu.Lock()
	if stop := s.held[name]; stop != nil {
		stop()
	}
	s.held[name] = cancel
	s.mu.Unlock()
	go func() {
		t := time.NewTicker(s.lockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := s.lockOnce(ctx, name); err != nil && ctx.Err() == nil {
				s.logger.Warn("certificate storage lock not renewed", "lock", name, "err", err)
			}
		}
	}()
}

// RenewLockLease renews this process's lease on name now; see sharedStorage for why
// leaseDuration is not used.
func (s *sharedStorage) RenewLockLease(ctx context.Context, name string, _ time.Duration) error {
	_, err := s.lockOnce(ctx, name)
	if errors.Is(err, errCertLocked) {
		return fmt.Errorf("certificate storage: lock %s was lost to another edge", name)
	}
	return err
}

// releaseAll frees every lock this process holds, at shutdown: the next edge need not
// wait for their leases to end.
func (s *sharedStorage) releaseAll() {
	s.mu.Lock()
	names := make([]string, 0, len(s.held))
	for name := range s.held {
		names = append(names, name)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range names {
		if err := s.Unlock(ctx, name); err != nil {
			s.logger.Warn("certificate storage lock not freed at shutdown; its lease ends by itself", "lock", name, "err", err)
		}
	}
}

// Unlock stops the keep-alive and frees name.
func (s *sharedStorage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	if stop := s.held[name]; stop != nil {
		stop()
		delete(s.held, name)
	}
	s.mu.Unlock()
	status, data, err := s.do(ctx, http.MethodDelete, "/v1/certs/locks/"+escapeKey(name), url.Values{"holder": {s.holder}}, nil)
	if err != nil {
		return err // the lease ends by itself
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return apiError("unlock "+name, status, data)
	}
	return nil
}
