package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
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
}

// currentVersion reads the binary's build information, which the linker flags fill in
// where cmd/go recorded nothing.
func currentVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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

// String is the one line armor version and armor --version print.
func (v buildVersion) String() string {
	commit := "commit unknown"
	if v.Commit != "" {
		commit = "commit " + v.Commit
		if v.Modified {
			commit += " (modified)"
		}
	}
	return fmt.Sprintf("armor %s, %s, %s %s", v.Version, commit, v.Go, v.Platform)
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
