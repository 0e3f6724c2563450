package aptsources

import (
	"fmt"
	"slices"
	"strings"
)

// Suite is one suite as the entry names it.
type Suite struct {
	Name       string   // the dists/ directory: the codename
	Components []string // in the order the entry lists them
	Source     bool     // every component has a Sources index: deb-src works too
}

// Entry returns the .sources text for the repository at uri (ending in "/"), whose
// InRelease files are signed by a key of the keyring at signedBy ("" for none): one
// stanza per distinct (types, components), suites in the order given. Suites without a
// component are left out.
func Entry(uri, signedBy string, suites []Suite) string {
	type group struct {
		types, comps string
		suites       []string
	}
	var groups []*group
	for _, s := range suites {
		if len(s.Components) == 0 {
			continue
		}
		types := "deb"
		if s.Source {
			types = "deb deb-src"
		}
		comps := strings.Join(s.Components, " ")
		i := slices.IndexFunc(groups, func(g *group) bool { return g.types == types && g.comps == comps })
		if i < 0 {
			groups = append(groups, &group{types: types, comps: comps})
			i = len(groups) - 1
		}
		if !slices.Contains(groups[i].suites, s.Name) {
			groups[i].suites = append(groups[i].suites, s.Name)
		}
	}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "Types: %s\nURIs: %s\nSuites: %s\nComponents: %s\n", g.types, uri, strings.Join(g.suites, " "), g.comps)
		if signedBy != "" {
			fmt.Fprintf(&b, "Signed-By: %s\n", signedBy)
		}
	}
	return b.String()
}

// URI is the repository URI of hostname: https when the edges serve it over TLS.
func URI(hostname string, https bool) string {
	if https {
		return "https://" + hostname + "/"
	}
	return "http://" + hostname + "/"
}

// KeyringPath is where the keyring of repository name is installed, by the page's
// steps and by its keyring package alike.
func KeyringPath(name string) string { return "/usr/share/keyrings/" + name + "-archive-keyring.gpg" }

// Path is the .sources file of repository name.
func Path(name string) string { return "/etc/apt/sources.list.d/" + name + ".sources" }
