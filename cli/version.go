package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/armor-apt/armor/store"
)

// Set with -ldflags -X by the Makefile, from git. They are the fallback for a binary
// that carries no VCS stamp of its own: cmd/go stamps vcs.revision only when .git is a
// directory (not in a git worktree, whose .git is a file) and not with -buildvcs=false.
var (
	linkVersion  string // module version, e.g. v1.2.0, or git describe's output
	linkCommit   string // full commit hash
	linkModified string // "true" when the working tree had changes
)

// buildVersion is what armor version prints.
type buildVersion struct {
	Version  string `json:"version"`  // the main module's version; "(devel)" for a local build
	Commit   string `json:"commit"`   // the VCS commit it was built from; "" when unknown
	Modified bool   `json:"modified"` // the working tree differed from Commit
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Backends are the rclone backends the binary carries (store.Backends), and
	// AllBackends says it was built with every one (-tags allbackends).
	Backends    []string `json:"backends"`
	AllBackends bool     `json:"all_backends"`
}

// currentVersion reads the binary's build information, which the linker flags fill in
// where cmd/go recorded nothing.
func currentVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Backends: store.Backends(), AllBackends: store.AllBackends()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Commit == "" && linkCommit != "" {
		v.Commit, v.Modified = linkCommit, linkModified == "true"
	}
	if v.Version == "(devel)" && linkVersion != "" {
		v.Version = linkVersion
	}
	return v
}

// String is what armor version and armor --version print: the version, commit and
// platform on one line, and the rclone backends the binary carries on the next, so a
// user can tell whether it can reach their store.
func (v buildVersion) String() string {
	commit := "commit unknown"
	if v.Commit != "" {
		commit = "commit " + v.Commit
		if v.Modified {
			commit += " (modified)"
		}
	}
	return fmt.Sprintf("armor %s, %s, %s %s\n%s", v.Version, commit, v.Go, v.Platform, v.backendsLine())
}

// backendsLine names the rclone backends the binary carries.
func (v buildVersion) backendsLine() string {
	list := strings.Join(v.Backends, ", ")
	if v.AllBackends {
		return fmt.Sprintf("rclone backends: all %d of rclone's (built with -tags allbackends): %s", len(v.Backends), list)
	}
	return "rclone backends: " + list + " (make build-all, or go build -tags allbackends, for every other one)"
}

// VersionCmd prints the version.
type VersionCmd struct{}

// Run prints the version.
func (VersionCmd) Run(g *Globals) error {
	v := currentVersion()
	if g.JSON {
		return printJSON(g.stdout, v)
	}
	_, err := fmt.Fprintln(g.stdout, v)
	return err
}
