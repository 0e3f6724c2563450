package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rclone/rclone/fs"
	"github.com/rclone/rclone/fs/config"
	"github.com/rclone/rclone/fs/fspath"
	"github.com/rclone/rclone/fs/object"
	"github.com/rclone/rclone/fs/walk"
)

// Timeouts of requests to an rclone remote. A metadata request (the existence check
// before an upload, Has, Stat, Delete) that gets no answer within RcloneRequestTimeout
// fails with an error naming the store; data transfers fail when no byte moves for
// rcloneIdleTimeout.
const (
	RcloneRequestTimeout = 10 * time.Second
	rcloneConnectTimeout = 10 * time.Second
	rcloneIdleTimeout    = 30 * time.Second
	rcloneRetries        = 3
)

// Rclone is a Store over any rclone remote. Objects live at ObjectPath(sum) under the
// remote's root. On remotes whose uploads are not atomic (the local backend, sftp, ...)
// Put writes tmp/<sum>.<random> and then moves it into place on the server side; on
// bucket-based remotes (S3, GCS, Azure, ...) a single PUT is already atomic.
type Rclone struct {
	f    fs.Fs
	name string // the remote, without credentials
	// base carries rclone's configuration for this store (timeouts, retries); every call
	// copies it into the caller's context.
	base context.Context
	// direct: Put writes the final name directly, because uploads are atomic (or the
	// remote cannot move).
	direct bool
	// localRoot is the root directory when the remote is a local path: written objects
	// and their directories are fsynced.
	localRoot string
}

var _ Store = (*Rclone)(nil)

// OpenRclone opens the store at remote, any rclone path: a local directory
// ("/srv/armor-store", "./store"), a connection string
// (":s3,provider=AWS,endpoint='...':bucket/prefix"), or "name:bucket/prefix" for a remote
// configured in the user's rclone.conf ($RCLONE_CONFIG, else rclone's default location)
// or in RCLONE_CONFIG_<NAME>_* environment variables. Credentials come from the
// environment (env_auth, RCLONE_S3_*, ...) or rclone.conf.
//
// The default build carries the local and s3 backends; build with -tags allbackends for
// all of rclone's. Opening does not contact the remote; the first request does.
func OpenRclone(ctx context.Context, remote string) (*Rclone, error) {
	return OpenRcloneWith(ctx, remote, RcloneOptions{})
}

// RcloneOptions adjusts OpenRcloneWith; the zero value is OpenRclone's default.
type RcloneOptions struct {
	// Attempts is how many times rclone tries a request before returning its error
	// (0: 3). rclone applies it twice over, in the backend's SDK and again in its own
	// pacer, each with backoff: with an S3 endpoint unreachable, a miss through edged
	// (which tries three times itself) failed after about 21 s with 3, 7 s with 2 and
	// 0.3 s with 1. A caller that retries on its own terms (WithRetry) and must answer
	// quickly wants 1.
	Attempts int
}

// OpenRcloneWith is OpenRclone with options.
func OpenRcloneWith(ctx context.Context, remote string, opts RcloneOptions) (*Rclone, error) {
	quietRclone()
	parsed, err := fspath.Parse(remote)
	if err != nil {
		return nil, fmt.Errorf("open store: invalid rclone remote: %w", err)
	}
	name := redactRemote(parsed)
	if parsed.Name != "" && !strings.HasPrefix(parsed.Name, ":") {
		if err := installRcloneConfig(); err != nil {
			return nil, fmt.Errorf("open store %s: %w", name, err)
		}
	}
	if err := checkBackend(parsed); err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	base, ci := fs.AddConfig(context.Background())
	ci.ConnectTimeout = fs.Duration(rcloneConnectTimeout)
	ci.Timeout = fs.Duration(rcloneIdleTimeout)
	ci.LowLevelRetries = rcloneRetries
	// An object's modification time is when it was stored (List reports it to the
	// garbage collector). Bucket listings carry it, where the mtime rclone keeps in
	// metadata would cost one request per object.
	ci.UseServerModTime = true
	if opts.Attempts > 0 {
		ci.LowLevelRetries = opts.Attempts
	}
	// The root is a directory: a trailing slash tells bucket-based backends so, and
	// spares them a request checking whether it is a file.
	root := remote
	if parsed.Path != "" && !strings.HasSuffix(root, "/") {
		root += "/"
	}
	f, err := newFs(fs.CopyConfig(ctx, base), root)
	switch {
	case errors.Is(err, fs.ErrorNotFoundInConfigFile):
		return nil, fmt.Errorf("open store %s: %w: configure it with `rclone config` (or RCLONE_CONFIG_<NAME>_TYPE etc.), "+
			"or point RCLONE_CONFIG at the rclone.conf that has it", name, err)
	case errors.Is(err, fs.ErrorIsFile):
		return nil, fmt.Errorf("open store %s: it is a file, not a directory", name)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	ft := f.Features()
	s := &Rclone{f: f, name: name, base: base, direct: ft.BucketBased || ft.Move == nil}
	if ft.IsLocal {
		s.localRoot = f.Root()
	}
	return s, nil
}

// newFs calls fs.NewFs, giving up after RcloneRequestTimeout: some backends connect at
// once. The context is not given a deadline because a backend may keep it.
func newFs(ctx context.Context, remote string) (fs.Fs, error) {
	type result struct {
		f   fs.Fs
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := fs.NewFs(ctx, remote)
		done <- result{f, err}
	}()
	timer := time.NewTimer(RcloneRequestTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.f, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("no answer within %v (is the endpoint reachable?)", RcloneRequestTimeout)
	}
}

// String names the store without credentials.
func (s *Rclone) String() string { return s.name }

// callCtx gives ctx this store's rclone configuration.
func (s *Rclone) callCtx(ctx context.Context) context.Context {
	return fs.CopyConfig(ctx, s.base)
}

// requestCtx is callCtx with the deadline of one metadata request.
func (s *Rclone) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, RcloneRequestTimeout)
	return s.callCtx(ctx), cancel
}

// explain turns err from rclone into a message naming the store, with advice for the
// common causes. ctx is the caller's context.
func (s *Rclone) explain(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s in store %s: no answer within %v (is the endpoint reachable?)", what, s.name, RcloneRequestTimeout)
	}
	if code := httpStatus(err); code == 401 || code == 403 {
		return fmt.Errorf("%s in store %s: access denied (HTTP %d): check the store's credentials "+
			"(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY with env_auth, RCLONE_S3_* or RCLONE_CONFIG_<NAME>_* variables, or rclone.conf): %w",
			what, s.name, code, err)
	}
	return fmt.Errorf("%s in store %s: %w", what, s.name, err)
}

// httpStatus digs an HTTP status code out of err, or returns 0.
func httpStatus(err error) int {
	var withCode interface{ HTTPStatusCode() int }
	if errors.As(err, &withCode) {
		return withCode.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrorObjectNotFound) || errors.Is(err, fs.ErrorDirNotFound) ||
		errors.Is(err, fs.ErrorIsDir) || errors.Is(err, fs.ErrorNotAFile)
}

// object looks sum up; a missing object gives an error wrapping ErrNotFound.
func (s *Rclone) object(ctx context.Context, what, sum string) (fs.Object, error) {
	if err := checkDigest(sum); err != nil {
		return nil, fmt.Errorf("%s in store %s: %w", what, s.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s %s in store %s: %w", what, sum, s.name, err)
	}
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	o, err := s.f.NewObject(rctx, ObjectPath(sum))
	switch {
	case err == nil:
		return o, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s %s in store %s: %w", what, sum, s.name, ctx.Err())
	case isNotFound(err):
		return nil, fmt.Errorf("%s %s in store %s: %w", what, sum, s.name, ErrNotFound)
	}
	return nil, s.explain(ctx, what+" "+sum, err)
}

// Has reports whether the object is present.
func (s *Rclone) Has(ctx context.Context, sum string) (bool, error) {
	_, err := s.object(ctx, "check", sum)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Stat returns the object's size.
func (s *Rclone) Stat(ctx context.Context, sum string) (Info, error) {
	o, err := s.object(ctx, "stat", sum)
	if err != nil {
		return Info{}, err
	}
	return Info{SHA256: sum, Size: o.Size()}, nil
}

// Open returns a reader of the object's bytes [offset, offset+length), clipped to the
// object.
func (s *Rclone) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	o, err := s.object(ctx, "open", sum)
	if err != nil {
		return nil, err
	}
	start, end, err := clipRange(o.Size(), offset, length)
	if err != nil {
		return nil, fmt.Errorf("open %s in store %s: %w", sum, s.name, err)
	}
	if start == end {
		return io.NopCloser(strings.NewReader("")), nil
	}
	var opts []fs.OpenOption
	if start > 0 || end < o.Size() {
		opts = append(opts, &fs.RangeOption{Start: start, End: end - 1})
	}
	rc, err := o.Open(s.callCtx(ctx), opts...)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("open %s in store %s: %w", sum, s.name, ErrNotFound)
		}
		return nil, s.explain(ctx, "open "+sum, err)
	}
	return rc, nil
}

// Delete removes the object if present.
func (s *Rclone) Delete(ctx context.Context, sum string) error {
	o, err := s.object(ctx, "delete", sum)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	if err := o.Remove(rctx); err != nil && !isNotFound(err) {
		return s.explain(ctx, "delete "+sum, err)
	}
	return nil
}

// List walks objects/sha256/ recursively (one flat listing on bucket-based remotes).
func (s *Rclone) List(ctx context.Context, fn func(Listed) error) error {
	const dir = "objects/sha256"
	cctx := s.callCtx(ctx)
	var mu sync.Mutex // the walk may call back from several goroutines
	var fnErr error
	err := walk.ListR(cctx, s.f, dir, true, -1, walk.ListObjects, func(entries fs.DirEntries) error {
		mu.Lock()
		defer mu.Unlock()
		if fnErr != nil {
			return fnErr
		}
		for _, e := range entries {
			o, ok := e.(fs.Object)
			if !ok {
				continue
			}
			sum := path.Base(o.Remote())
			if !ValidDigest(sum) || o.Remote() != ObjectPath(sum) {
				continue
			}
			if err := fn(Listed{SHA256: sum, Size: o.Size(), ModTime: o.ModTime(cctx)}); err != nil {
				fnErr = err
				return err
			}
		}
		return ctx.Err()
	})
	switch {
	case fnErr != nil:
		return fnErr
	case ctx.Err() != nil:
		return fmt.Errorf("list store %s: %w", s.name, ctx.Err())
	case errors.Is(err, fs.ErrorDirNotFound):
		return nil // nothing stored yet
	case err != nil:
		return s.explain(ctx, "list objects", err)
	}
	return nil
}

// Put stores the object unless it is present. It verifies the size and SHA-256 while
// streaming; the read that would complete a mismatching object fails, so the upload
// aborts and nothing is stored.
func (s *Rclone) Put(ctx context.Context, sum string, size int64, r io.Reader) (bool, error) {
	_, err := s.object(ctx, "put", sum)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	if size < 0 {
		return false, fmt.Errorf("put %s in store %s: negative size %d: %w", sum, s.name, size, ErrDigestMismatch)
	}
	if size == 0 {
		// Nothing to stream: check before anything is written.
		v := newVerifier(r, sum, 0)
		if err := v.Verify(); err != nil {
			return false, fmt.Errorf("put in store %s: %w", s.name, err)
		}
		r = strings.NewReader("")
	}
	final := ObjectPath(sum)
	name := final
	if !s.direct {
		name = tmpName(sum)
	}
	v := newVerifier(ctxReader{ctx, r}, sum, size)
	info := object.NewStaticObjectInfo(name, time.Now(), size, true, nil, s.f)
	o, err := s.f.Put(s.callCtx(ctx), v, info)
	if err != nil {
		if !s.direct {
			s.remove(ctx, name)
		}
		if v.err != nil {
			// The source made the upload fail: a mismatch, a read error or cancellation.
			err = v.err
		}
		if errors.Is(err, ErrDigestMismatch) {
			return false, fmt.Errorf("put in store %s: %w", s.name, err)
		}
		return false, s.explain(ctx, "put "+sum, err)
	}
	if err := v.Verify(); err != nil {
		// The backend stopped reading early and the rest did not match.
		_ = o.Remove(s.callCtx(context.WithoutCancel(ctx)))
		return false, fmt.Errorf("put in store %s: %w", s.name, err)
	}
	if s.direct {
		return true, nil
	}
	return s.moveIntoPlace(ctx, o, sum)
}

// moveIntoPlace makes the verified temporary object o the object sum.
func (s *Rclone) moveIntoPlace(ctx context.Context, o fs.Object, sum string) (bool, error) {
	final := ObjectPath(sum)
	if err := s.syncLocal(o.Remote()); err != nil {
		s.remove(ctx, o.Remote())
		return false, fmt.Errorf("put %s in store %s: %w", sum, s.name, err)
	}
	// Another writer may have finished the same object meanwhile: keep its copy.
	if _, err := s.object(ctx, "put", sum); err == nil {
		s.remove(ctx, o.Remote())
		return false, nil
	}
	if _, err := s.f.Features().Move(s.callCtx(ctx), o, final); err != nil {
		s.remove(ctx, o.Remote())
		return false, s.explain(ctx, "move "+sum+" into place", err)
	}
	if err := s.syncLocal(filepath.Dir(final)); err != nil {
		return true, fmt.Errorf("put %s in store %s: %w", sum, s.name, err)
	}
	return true, nil
}

// remove deletes the object at remote name, ignoring errors: it cleans up after a
// failed upload. It works even when ctx was cancelled.
func (s *Rclone) remove(ctx context.Context, name string) {
	rctx, cancel := s.requestCtx(context.WithoutCancel(ctx))
	defer cancel()
	if o, err := s.f.NewObject(rctx, name); err == nil {
		_ = o.Remove(rctx)
	}
}

// syncLocal fsyncs the file or directory at remote name when the store is a local
// directory, so that a renamed object survives a crash. Other remotes: no-op.
func (s *Rclone) syncLocal(name string) error {
	if s.localRoot == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(s.localRoot, filepath.FromSlash(name)))
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	return nil
}

// tmpName is a fresh temporary name for an upload of sum.
func tmpName(sum string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tmp/" + sum + "." + hex.EncodeToString(b[:])
}

// redactRemote renders a parsed remote for messages, keeping only the connection string
// parameters known to hold no secret.
func redactRemote(p fspath.Parsed) string {
	if p.Name == "" {
		return p.Path
	}
	keys := make([]string, 0, len(p.Config))
	for k := range p.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(p.Name)
	for _, k := range keys {
		switch k {
		case "provider", "endpoint", "region", "type":
			fmt.Fprintf(&b, ",%s='%s'", k, p.Config[k])
		}
	}
	b.WriteString(":")
	b.WriteString(p.Path)
	return b.String()
}

// CleanTemp removes the temporary uploads under tmp/ that are older than age: an
// interrupted Put on a remote without atomic uploads leaves one behind. It returns how
// many it removed. Only run it with an age longer than any upload takes.
func (s *Rclone) CleanTemp(ctx context.Context, age time.Duration) (int, error) {
	entries, err := s.f.List(s.callCtx(ctx), "tmp")
	if errors.Is(err, fs.ErrorDirNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, s.explain(ctx, "list temporary uploads", err)
	}
	n := 0
	cutoff := time.Now().Add(-age)
	for _, e := range entries {
		o, ok := e.(fs.Object)
		if !ok || !o.ModTime(ctx).Before(cutoff) {
			continue
		}
		if err := o.Remove(s.callCtx(ctx)); err != nil && !isNotFound(err) {
			return n, s.explain(ctx, "remove temporary upload "+o.Remote(), err)
		}
		n++
	}
	return n, nil
}

// ErrBackendMissing: the remote's rclone backend is not compiled into this binary.
var ErrBackendMissing = errors.New("rclone backend not in this build")

// checkBackend fails with ErrBackendMissing, naming the backend and how to get a binary
// that has it, when the remote's backend type is known and this build lacks it. rclone's
// own error ("didn't find backend called ...") names neither the cause nor the remedy.
func checkBackend(parsed fspath.Parsed) error {
	var typ string
	switch {
	case parsed.Name == "":
		return nil // a local path
	case strings.HasPrefix(parsed.Name, ":"):
		typ = parsed.Name[1:]
	default:
		typ = config.GetValue(parsed.Name, "type")
	}
	if typ == "" {
		return nil // an unknown remote: fs.NewFs says so in its own words
	}
	if _, err := fs.Find(typ); err != nil {
		if allBackends {
			return fmt.Errorf("%w: rclone has no backend %q", ErrBackendMissing, typ)
		}
		return fmt.Errorf("%w: this armor carries rclone's local and s3 backends, not %q; if it is one of "+
			"rclone's, build armor with all of them: make build-all (go build -tags allbackends -o bin/armor ./cli/armor)",
			ErrBackendMissing, typ)
	}
	return nil
}
