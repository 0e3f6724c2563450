package gen

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/armor-apt/armor/manifest"
)

// Phase sets the Phased-Update-Percentage of a package version (`armor phase`): apt 2.1
// and later install the update on that share of machines only (each machine decides by
// a hash of its id), so a distributor can roll an update out gradually and stop it. The
// package file is not touched: only its stanza changes. An empty Percent removes the
// field (every machine takes the update).
type Phase struct {
	Name, Version string
	Suite         string // a codename; empty for every suite
	Percent       string
}

// applyPhases sets the Phased field of the packages each phase names.
func applyPhases(pkgs *packageList, phases []Phase) error {
	for _, ph := range phases {
		if ph.Percent != "" {
			if n, err := strconv.Atoi(ph.Percent); err != nil || n < 0 || n > 99 || strconv.Itoa(n) != ph.Percent {
				return fmt.Errorf("phase %s %s: %q is not a percentage from 0 to 99 (100 means every machine: no phasing)", ph.Name, ph.Version, ph.Percent)
			}
		}
		found := false
		for i := range pkgs.list {
			p := &pkgs.list[i]
			if p.Name == ph.Name && p.Version == ph.Version && (ph.Suite == "" || p.Suite == ph.Suite) && p.Architecture != "source" {
				p.Phased = ph.Percent
				found = true
			}
		}
		if !found {
			return fmt.Errorf("phase %s %s: %w; nothing was changed", ph.Name, ph.Version, ErrNotFound)
		}
	}
	return nil
}

var phasedField = []byte("\nPhased-Update-Percentage: ")

// withPhase returns the stanza with its Phased-Update-Percentage set to percent (the field
// removed for ""), placed before Filename as dak places it.
func withPhase(st []byte, percent string) []byte {
	i := bytes.Index(st, phasedField)
	if i < 0 && percent == "" {
		return st // the usual case: nothing to do
	}
	out := st
	if i >= 0 {
		end := bytes.IndexByte(st[i+1:], '\n')
		out = append(append([]byte(nil), st[:i]...), st[i+1+end:]...)
	}
	if percent == "" {
		return out
	}
	at := bytes.Index(out, []byte("\nFilename: "))
	if at < 0 {
		at = len(out) - 1
	}
	field := append(append([]byte(nil), phasedField...), percent...)
	res := make([]byte, 0, len(out)+len(field))
	res = append(res, out[:at]...)
	res = append(res, field...)
	return append(res, out[at:]...)
}

// inheritPhases carries the parent's phasing to the release's entries of the same
// packages (an input of a package the parent lists comes without it). Few packages are
// phased at a time, so only those are looked up.
func inheritPhases(pkgs *packageList, prev *manifest.Manifest) {
	if prev == nil {
		return
	}
	phased := map[manifest.Key]*manifest.Package{}
	for i := range prev.Packages {
		if p := &prev.Packages[i]; p.Phased != "" {
			phased[p.Key()] = p
		}
	}
	if len(phased) == 0 {
		return
	}
	for i := range pkgs.list {
		p := &pkgs.list[i]
		if q, ok := phased[p.Key()]; ok && p.Phased == "" && q.SHA256 == p.SHA256 {
			p.Phased = q.Phased
		}
	}
}
