package controld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/store"
)

// Garbage collection. Nothing else ever deletes an object, so without it the store only
// grows. A collection (POST /v1/gc, armor gc, or every gc_interval) works in the manner
// of restic's forget + prune:
//
//  1. Forget: in each repository, delete the record of every release no rule keeps
//     (state.Kept with the configured policy: always the active release, the rollback
//     target and those inside the retention window, which edges still serve; then the
//     last gc_keep_last active ones and drafts younger than gc_keep_drafts). Each
//     deletion re-checks the rules in its own transaction, so a release activated
//     meanwhile stays.
//  2. Mark: read the manifest of every release still recorded; its objects and the
//     manifest object itself are referenced. A manifest that cannot be read stops the
//     collection: what it references is unknown.
//  3. Sweep: list the store (store.Store.List: objects uploaded by a push that never
//     recorded its release are referenced by nothing controld knows, so only a listing
//     finds them) and delete every object that is referenced by no recorded release
//     and older than gc_grace. The grace period spares the uploads of a push in flight,
//     which recorded nothing yet.
//
// The race with recording: a push may rely on an object that is already in the store
// (it does not upload it again) while the collector, which saw no release referencing
// it, is about to delete it. Recording and deletion therefore exclude each other
// (gcState.record): a release is verified and recorded under the read lock, and the
// collector deletes in batches under the write lock, first marking the objects of every
// release recorded since its last look. So an object is never deleted once a release
// referencing it is recorded, and a release whose object was deleted before it was
// verified is refused (422, the object is missing), never recorded incomplete; running
// armor push again uploads the object (the push forgets what it believed stored).
//
// The locks are in this process and, when the state store is shared by replicas
// (sharedLocks: PostgreSQL's advisory locks), in the database too: then a recording on
// one replica excludes deletion by another, and one collection runs at a time over all.
const (
	DefaultGCGrace      = 24 * time.Hour
	DefaultGCKeepLast   = 3
	DefaultGCKeepDrafts = 7 * 24 * time.Hour
	// gcBatch is how many objects are deleted per hold of the recording lock.
	gcBatch = 256
	// gcBy is who deletes releases on a schedule, in their tombstones.
	gcBy = "gc"
)

// gcState serialises collections and excludes recording while objects are deleted.
type gcState struct {
	run    sync.Mutex   // one collection at a time
	record sync.RWMutex // read: verifying and recording a release; write: deleting objects
}

// sharedLocks is a state store shared by several processes that extends the
// collector's exclusions to all of them.
type sharedLocks interface {
	// HoldRecording takes the recording lock shared; HoldDeletion exclusively.
	HoldRecording(ctx context.Context) (release func(), err error)
	HoldDeletion(ctx context.Context) (release func(), err error)
	// TryCollect takes the collection lock unless another process holds it (ok false).
	TryCollect(ctx context.Context) (release func(), ok bool, err error)
}

// holdRecording keeps the collector from deleting objects until the returned function
// is called. recordRelease holds it from verification to the recording.
func (s *Server) holdRecording(ctx context.Context) (func(), error) {
	s.gc.record.RLock()
	if l, ok := s.st.(sharedLocks); ok {
		release, err := l.HoldRecording(ctx)
		if err != nil {
			s.gc.record.RUnlock()
			return nil, err
		}
		return func() { release(); s.gc.record.RUnlock() }, nil
	}
	return s.gc.record.RUnlock, nil
}

// holdDeletion excludes every recording until the returned function is called.
func (s *Server) holdDeletion(ctx context.Context) (func(), error) {
	s.gc.record.Lock()
	if l, ok := s.st.(sharedLocks); ok {
		release, err := l.HoldDeletion(ctx)
		if err != nil {
			s.gc.record.Unlock()
			return nil, err
		}
		return func() { release(); s.gc.record.Unlock() }, nil
	}
	return s.gc.record.Unlock, nil
}

// policy is the keep policy of the collector.
func (s *Server) policy() state.KeepPolicy {
	return state.KeepPolicy{Last: s.cfg.GCKeepLast, Drafts: s.cfg.GCKeepDrafts.D()}
}

// errGCBusy answers a collection asked while another runs.
var errGCBusy = &Error{Status: http.StatusConflict, Code: api.CodeBusy,
	Message: "a garbage collection is running already: wait for it to finish"}

// collect runs one garbage collection as by, or in a dry run reports what it would do.
func (s *Server) collect(ctx context.Context, dryRun bool, by string) (api.GCReport, error) {
	if !s.gc.run.TryLock() {
		return api.GCReport{}, errGCBusy
	}
	defer s.gc.run.Unlock()
	if l, ok := s.st.(sharedLocks); ok {
		release, ok, err := l.TryCollect(ctx)
		if err != nil {
			return api.GCReport{}, err
		}
		if !ok {
			return api.GCReport{}, errGCBusy
		}
		defer release()
	}
	c := &collection{s: s, by: by, refs: map[string]bool{}, seen: map[string]bool{}}
	c.rep = api.GCReport{DryRun: dryRun, StartedAt: s.now().UTC(), Grace: duration.Duration(s.cfg.GCGrace.D()), Releases: []api.GCRelease{}}
	start := time.Now()
	if err := c.forget(ctx); err != nil {
		return api.GCReport{}, err
	}
	if err := c.mark(ctx); err != nil {
		return api.GCReport{}, err
	}
	garbage, err := c.list(ctx)
	if err != nil {
		return api.GCReport{}, err
	}
	if !dryRun {
		if err := c.sweep(ctx, garbage); err != nil {
			return api.GCReport{}, err
		}
		s.gcEvent(ctx, by, c.rep)
	}
	c.rep.Elapsed = duration.Duration(time.Since(start).Round(time.Millisecond))
	return c.rep, nil
}

// collection is the working state of one run.
type collection struct {
	s    *Server
	by   string
	rep  api.GCReport
	gone map[string]bool // repository/id of releases deleted (or, dry, to be deleted)
	seen map[string]bool // repository/id of releases whose objects are marked
	refs map[string]bool // referenced objects
}

func releaseKey(repo, id string) string { return repo + "/" + id }

// forget deletes (or lists, dry) the releases no rule keeps.
func (c *collection) forget(ctx context.Context) error {
	c.gone = map[string]bool{}
	now := c.s.now()
	repos, err := c.s.st.Repositories(ctx)
	if err != nil {
		return err
	}
	for _, r := range repos {
		rels, err := c.s.st.Releases(ctx, r.Name)
		if err != nil {
			return err
		}
		hist, err := c.s.st.History(ctx, r.Name)
		if err != nil {
			return err
		}
		kept := state.Kept(r, rels, hist, now, c.s.policy())
		for _, rel := range rels {
			if _, ok := kept[rel.ID]; ok {
				continue
			}
			if !c.rep.DryRun {
				_, err := c.s.st.DeleteRelease(ctx, state.Deletion{Repository: r.Name, ID: rel.ID, By: c.by, At: now, Policy: c.s.policy()})
				switch {
				case errors.Is(err, state.ErrKept), errors.Is(err, state.ErrNotFound):
					continue // activated or deleted meanwhile
				case err != nil:
					return fmt.Errorf("delete release %s of %s: %w", rel.ID, r.Name, err)
				}
				c.s.log.Info("release deleted by the garbage collector", "repository", r.Name, "release", rel.ID, "by", c.by)
			}
			c.gone[releaseKey(r.Name, rel.ID)] = true
			c.rep.Releases = append(c.rep.Releases, api.GCRelease{Repository: r.Name, ID: rel.ID, Manifest: rel.Manifest, PushedAt: rel.PushedAt})
		}
	}
	return nil
}

// mark references the objects of every recorded release not yet seen (and not being
// forgotten in a dry run). It is called again under the recording lock before each
// batch of deletions, and then marks only the releases recorded meanwhile.
func (c *collection) mark(ctx context.Context) error {
	repos, err := c.s.st.Repositories(ctx)
	if err != nil {
		return err
	}
	kept := 0
	for _, r := range repos {
		rels, err := c.s.st.Releases(ctx, r.Name)
		if err != nil {
			return err
		}
		for _, rel := range rels {
			k := releaseKey(r.Name, rel.ID)
			if c.gone[k] {
				continue
			}
			kept++
			if c.seen[k] {
				continue
			}
			if err := c.markRelease(ctx, rel); err != nil {
				return err
			}
			c.seen[k] = true
		}
	}
	c.rep.KeptReleases = kept
	return nil
}

// markRelease references the objects of one release and its manifest.
func (c *collection) markRelease(ctx context.Context, rel state.Release) error {
	if c.refs[rel.Manifest] {
		return nil // another release with the same manifest: the same objects
	}
	m, err := c.s.loadManifest(ctx, rel.Manifest)
	var e *Error
	switch {
	case errors.As(err, &e):
		// Without the manifest the release's objects are unknown: deleting anything
		// might break it.
		return &Error{Status: e.Status, Code: e.Code, Err: err, Message: fmt.Sprintf(
			"garbage collection stopped, no object deleted since: the manifest of release %s of %s cannot be read: %s (armor store check --release %s shows what the store lacks)",
			rel.ID, rel.Repository, e.Message, rel.ID)}
	case err != nil:
		return fmt.Errorf("garbage collection: read the manifest of release %s of %s: %w", rel.ID, rel.Repository, err)
	}
	c.refs[rel.Manifest] = true
	for _, o := range m.Objects() {
		c.refs[o.SHA256] = true
	}
	return nil
}

// list walks the store, counts it, and returns the objects that may be deleted.
func (c *collection) list(ctx context.Context) ([]store.Listed, error) {
	cutoff := c.s.now().Add(-c.s.cfg.GCGrace.D())
	var garbage []store.Listed
	err := c.s.store.List(ctx, func(o store.Listed) error {
		c.rep.Objects++
		c.rep.Bytes += o.Size
		switch {
		case c.refs[o.SHA256]:
			c.rep.Referenced++
			c.rep.ReferencedBytes += o.Size
		case o.ModTime.After(cutoff):
			c.rep.Young++
			c.rep.YoungBytes += o.Size
		default:
			garbage = append(garbage, o)
			c.rep.Deleted++
			c.rep.DeletedBytes += o.Size
		}
		return nil
	})
	if err != nil {
		return nil, storeFailed("list the store %s: %w", c.s.store, err)
	}
	return garbage, nil
}

// sweep deletes garbage in batches, each under the recording lock after marking the
// releases recorded since the last look. Objects such a release references are spared
// and no longer counted as deleted.
func (c *collection) sweep(ctx context.Context, garbage []store.Listed) error {
	for len(garbage) > 0 {
		n := min(gcBatch, len(garbage))
		if err := c.sweepBatch(ctx, garbage[:n]); err != nil {
			return err
		}
		garbage = garbage[n:]
	}
	return nil
}

func (c *collection) sweepBatch(ctx context.Context, batch []store.Listed) error {
	release, err := c.s.holdDeletion(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := c.mark(ctx); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.s.cfg.StoreConcurrency)
	for _, o := range batch {
		if c.refs[o.SHA256] {
			c.rep.Deleted--
			c.rep.DeletedBytes -= o.Size
			c.rep.Referenced++
			c.rep.ReferencedBytes += o.Size
			continue
		}
		g.Go(func() error {
			if err := c.s.store.Delete(gctx, o.SHA256); err != nil {
				return storeFailed("garbage collection stopped: delete object %s from the store %s: %w", o.SHA256, c.s.store, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// scheduleGC collects garbage every interval until ctx ends.
func (s *Server) scheduleGC(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := s.collect(ctx, false, gcBy)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("garbage collection", "store", s.store, "err", err)
		case err == nil:
			s.log.Info("garbage collected", "store", s.store, "releases_deleted", len(rep.Releases),
				"objects_deleted", rep.Deleted, "bytes_deleted", rep.DeletedBytes,
				"objects_left", rep.Objects-rep.Deleted, "young_spared", rep.Young, "elapsed", rep.Elapsed)
		}
	}
}

// gcHandler is POST /v1/gc. The store is shared by every repository, so it needs the
// admin action on all of them.
func (s *Server) gcHandler(c *call) error {
	if !slices.Contains(c.tok.Repositories, api.AllRepositories) || !c.isAdmin() {
		return forbidden("token %s may not collect garbage: the store is shared by every repository, so it takes a token with the admin action on all of them (\"*\")", c.tok.Name)
	}
	var req api.GCRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	rep, err := s.collect(c.ctx(), req.DryRun, c.tok.Name)
	if err != nil {
		return err
	}
	s.log.Info("garbage collection", "dry_run", rep.DryRun, "releases", len(rep.Releases),
		"objects_deleted", rep.Deleted, "bytes_deleted", rep.DeletedBytes, "token", c.tok.Name)
	writeJSON(c.w, http.StatusOK, rep)
	return nil
}

// deleteRelease is DELETE /v1/repos/{repo}/releases/{id}: it forgets a release that
// nothing protects (not active, not the rollback target, not inside the retention
// window). Its objects leave the store at the next garbage collection.
func (s *Server) deleteRelease(c *call) error {
	name, id := c.r.PathValue("repo"), c.r.PathValue("id")
	if err := c.allow(name, api.ActionAdmin); err != nil {
		return err
	}
	rel, err := s.st.DeleteRelease(c.ctx(), state.Deletion{Repository: name, ID: id, By: c.tok.Name, At: s.now().UTC()})
	var kept *state.KeptError
	if errors.As(err, &kept) {
		return &Error{Status: http.StatusConflict, Code: api.CodeKept, Err: err,
			Message: fmt.Sprintf("release %s of repository %s cannot be deleted: %s", id, name, kept.Reason)}
	}
	if err != nil {
		return err
	}
	s.log.Info("release deleted", "repository", name, "release", id, "token", c.tok.Name)
	writeJSON(c.w, http.StatusOK, toAPIRelease(rel))
	return nil
}
