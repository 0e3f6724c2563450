package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/store"
)

// RepairOptions say which release Repair mends, and from where.
type RepairOptions struct {
	Store    store.Store
	Manifest string // the local manifest file: its release is repaired
	Tree     string // the local tree holding the release's files
	Cache    string // the build cache: the record of what was pushed is dropped
	ReadData bool   // rehash the store's objects too, not only their sizes
	Jobs     int
}

// RepairReport says what Repair found and did.
type RepairReport struct {
	Check *CheckReport `json:"check"`
	// Repaired lists the objects uploaded again; Unrepairable those the store lacks (or
	// holds damaged) that the local tree has not either.
	Repaired     []Problem `json:"repaired"`
	Unrepairable []Problem `json:"unrepairable"`
}

// ErrUnrepairable: some objects the store lacks are not in the local tree either.
var ErrUnrepairable = errors.New("objects missing from the store and from the local tree")

// Repair checks every object of the local release in the store (as Check does) and
// uploads again, from the local tree, each one the store lacks or holds with other
// content, deleting the damaged copy first (a store never rewrites an object it holds).
// It drops the record of the last push to the store, so that the next push asks about
// every object again rather than trusting it.
func Repair(ctx context.Context, o RepairOptions) (*RepairReport, error) {
	rel, err := LocalRelease(o.Manifest)
	if err != nil {
		return nil, err
	}
	rep, err := Check(ctx, CheckOptions{Store: o.Store, Releases: []CheckRelease{rel}, ReadData: o.ReadData, Jobs: o.Jobs})
	if err != nil {
		return nil, err
	}
	out := &RepairReport{Check: rep}
	_ = os.Remove(pushedStatePath(o.Cache, o.Store))
	paths := rel.Local.Paths()
	local := map[string]string{} // digest → a local file that should hold it
	for p, obj := range paths {
		local[obj.SHA256] = filepath.Join(o.Tree, filepath.FromSlash(p))
	}
	local[rel.Manifest] = o.Manifest
	// Each object comes back from the file that should hold it, if it does; the damaged
	// copies go first, then the uploads go together, Jobs at a time.
	var uploads []Upload
	var repaired []Problem
	for _, p := range rep.Problems {
		file, ok := local[p.SHA256]
		if !ok {
			out.Unrepairable = append(out.Unrepairable, p)
			continue
		}
		info, err := hashFile(file)
		if err != nil || info.SHA256 != p.SHA256 {
			out.Unrepairable = append(out.Unrepairable, p)
			continue
		}
		if p.Kind != ProblemMissing {
			if err := o.Store.Delete(ctx, p.SHA256); err != nil {
				return out, fmt.Errorf("repair %s: delete the damaged object: %w", p.SHA256, err)
			}
		}
		uploads = append(uploads, Upload{SHA256: p.SHA256, Size: info.Size, Path: file})
		repaired = append(repaired, p)
	}
	if len(uploads) > 0 {
		if _, err := UploadMissing(ctx, o.Store, uploads, UploadOptions{Concurrency: o.Jobs}); err != nil {
			return out, fmt.Errorf("repair: upload %d objects again: %w", len(uploads), err)
		}
	}
	out.Repaired = repaired
	if len(out.Unrepairable) > 0 {
		return out, fmt.Errorf("%w: %d of %d (push from a machine that has them, or rebuild)", ErrUnrepairable, len(out.Unrepairable), len(rep.Problems))
	}
	return out, nil
}
