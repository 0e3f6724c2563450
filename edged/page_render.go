package edged

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/armor-apt/armor/debian/aptsources"
	"github.com/armor-apt/armor/manifest"
)

// The page's content: what it shows of a release and its keys, derived once, and the
// rendering of page.html.tmpl (html/template: everything from the manifest, the feed and
// the request is escaped).

//go:embed page.html.tmpl
var pageTemplateText string

var pageTemplate = template.Must(template.New("page").Parse(pageTemplateText))

// pageRelease is what the page shows of a release, derived from its manifest once per
// routing map (pageData).
type pageRelease struct {
	suites   []suiteView
	packages []pkgView // sorted by name, suite, component, version, architecture
	date     string    // the manifest's build date, as written
}

type suiteView struct {
	Name          string
	Components    []string
	Architectures []string
	Source        bool // every component has a Sources index: deb-src works
}

type pkgView struct {
	Name, Version, Architecture, Suite, Component string
	Href                                          string // absolute, percent-escaped path of the .deb
	Size                                          string // for people: "812 KiB"
	search                                        string // lowercase "name version arch suite/component"
}

type keyView struct {
	Fingerprint string // uppercase hex, as gpg --show-keys prints it
	UserIDs     []string
	Err         string // the key could not be read
}

type fileView struct {
	Name, Href string
}

// pageView is the template's data.
type pageView struct {
	Repository    string
	Base          string // scheme://host/
	Host          string
	Keyring       string // <repository>-archive-keyring.gpg, "" when the site has no keys
	KeyringPath   string
	SourcesPath   string
	Sources       string
	Keys          []keyView
	ReleaseID     string
	Activated     time.Time
	Built         string
	Suites        []suiteView
	Query         string
	Packages      []pkgView
	Total         int // packages in the release
	Matched       int // packages the query matched (Total without one)
	Truncated     bool
	Files         []fileView
	ActivatedISO  string
	ActivatedText string
}

// pageData returns the routing map's page data, deriving it on first use.
func (rm *routeMap) pageData() *pageRelease {
	rm.pageOnce.Do(func() { rm.page = derivePage(rm.release) })
	return rm.page
}

// derivePage reads what the page shows from a manifest: suites are the dists/<suite>/
// directories holding an InRelease or Release (and the suites packages name),
// components and architectures the <component>/binary-<arch>/Packages indexes under
// them (debian-installer indexes count for their component).
func derivePage(m *manifest.Manifest) *pageRelease {
	pr := &pageRelease{}
	if m == nil {
		return pr
	}
	pr.date = m.Date
	suites, codenames, inRelease := map[string]bool{}, map[string]bool{}, map[string]string{}
	for _, p := range m.Packages {
		suites[p.Suite], codenames[p.Suite] = true, true
	}
	for _, f := range m.Files {
		rest, ok := strings.CutPrefix(f.Path, "dists/")
		if !ok || strings.Contains(rest, "/by-hash/") {
			continue
		}
		if s, ok := strings.CutSuffix(rest, "/InRelease"); ok {
			suites[s] = true
			inRelease[s] = f.SHA256
		} else if s, ok := strings.CutSuffix(rest, "/Release"); ok && !strings.Contains(s, "/binary-") && !strings.HasSuffix(s, "/source") {
			suites[s] = true
		}
	}
	names := make([]string, 0, len(suites))
	for s := range suites {
		names = append(names, s)
	}
	names = withoutAliases(names, codenames, inRelease)
	// Longest first, so a path is given to the most specific suite that holds it.
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	type sets struct{ comps, archs, source map[string]bool }
	found := map[string]*sets{}
	for _, s := range names {
		found[s] = &sets{map[string]bool{}, map[string]bool{}, map[string]bool{}}
	}
	for _, f := range m.Files {
		rest, ok := strings.CutPrefix(f.Path, "dists/")
		if !ok || strings.Contains(rest, "/by-hash/") {
			continue
		}
		dir, base := splitDir(rest)
		if base != "Packages" && !strings.HasPrefix(base, "Packages.") && base != "Sources" && !strings.HasPrefix(base, "Sources.") {
			continue
		}
		i := slices.IndexFunc(names, func(s string) bool { return strings.HasPrefix(dir, s+"/") })
		if i < 0 {
			continue
		}
		st := found[names[i]]
		compDir, last := splitDir(dir[len(names[i])+1:])
		comp := strings.TrimSuffix(compDir, "/debian-installer")
		switch {
		case comp == "" || comp == "debian-installer":
		case last == "source" && strings.HasPrefix(base, "Sources"):
			st.comps[comp] = true
			st.source[comp] = true
		case strings.HasPrefix(last, "binary-") && strings.HasPrefix(base, "Packages"):
			st.comps[comp] = true
			st.archs[strings.TrimPrefix(last, "binary-")] = true
		}
	}
	for s, st := range found {
		sv := suiteView{Name: s, Components: sortedKeys(st.comps), Architectures: sortedKeys(st.archs)}
		sv.Source = len(st.source) > 0 && len(st.source) == len(st.comps)
		pr.suites = append(pr.suites, sv)
	}
	slices.SortFunc(pr.suites, func(a, b suiteView) int { return strings.Compare(a.Name, b.Name) })
	pr.packages = make([]pkgView, 0, len(m.Packages))
	for _, p := range m.Packages {
		pr.packages = append(pr.packages, pkgView{
			Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite, Component: p.Component,
			Href: escapePath(p.Path), Size: humanSize(p.Size),
			search: strings.ToLower(p.Name + " " + p.Version + " " + p.Architecture + " " + p.Suite + "/" + p.Component),
		})
	}
	slices.SortFunc(pr.packages, func(a, b pkgView) int {
		switch {
		case a.Name != b.Name:
			return strings.Compare(a.Name, b.Name)
		case a.Suite != b.Suite:
			return strings.Compare(a.Suite, b.Suite)
		case a.Component != b.Component:
			return strings.Compare(a.Component, b.Component)
		case a.Version != b.Version:
			return strings.Compare(a.Version, b.Version)
		case a.Architecture != b.Architecture:
			return strings.Compare(a.Architecture, b.Architecture)
		}
		return strings.Compare(a.Href, b.Href)
	})
	return pr
}

// humanSize writes a size in bytes, KiB, MiB or GiB, with one decimal below 10.
func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// withoutAliases drops from names each suite published as an alias of another (dists/
// stable beside dists/bookworm: the same InRelease), keeping the codename (a suite the
// packages name), else the first name in order.
func withoutAliases(names []string, codenames map[string]bool, inRelease map[string]string) []string {
	slices.SortFunc(names, func(a, b string) int {
		if codenames[a] != codenames[b] {
			if codenames[a] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	kept := map[string]bool{} // InRelease digests already named
	return slices.DeleteFunc(names, func(s string) bool {
		sum := inRelease[s]
		if sum == "" {
			return false
		}
		if kept[sum] {
			return true
		}
		kept[sum] = true
		return false
	})
}

// sourcesEntry is the deb822 .sources text for the suites (aptsources.Entry).
func sourcesEntry(base, signedBy string, suites []suiteView) string {
	as := make([]aptsources.Suite, len(suites))
	for i, s := range suites {
		as[i] = aptsources.Suite{Name: s.Name, Components: s.Components, Source: s.Source}
	}
	return aptsources.Entry(base, signedBy, as)
}

// views reads the fingerprints and user IDs of the site's armored keys.
func (ps *pageSite) views() []keyView {
	ps.keysOnce.Do(func() {
		for i, k := range ps.keys {
			ents, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k))
			if err != nil || len(ents) == 0 {
				ps.keyViews = append(ps.keyViews, keyView{Err: fmt.Sprintf("key %d of the routes feed cannot be read", i+1)})
				continue
			}
			for _, ent := range ents {
				kv := keyView{Fingerprint: strings.ToUpper(hex.EncodeToString(ent.PrimaryKey.Fingerprint))}
				for name := range ent.Identities {
					kv.UserIDs = append(kv.UserIDs, name)
				}
				slices.Sort(kv.UserIDs)
				ps.keyViews = append(ps.keyViews, kv)
			}
		}
	})
	return ps.keyViews
}

// matchPackages returns the packages every word of query is part of (case-insensitive,
// in name, version, architecture or suite/component), at most pageMaxRows of them, and
// how many matched in all.
func matchPackages(pkgs []pkgView, query string) ([]pkgView, int) {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return pkgs[:min(len(pkgs), pageMaxRows)], len(pkgs)
	}
	var out []pkgView
	n := 0
	for _, p := range pkgs {
		ok := true
		for _, w := range words {
			if !strings.Contains(p.search, w) {
				ok = false
				break
			}
		}
		if ok {
			if n < pageMaxRows {
				out = append(out, p)
			}
			n++
		}
	}
	return out, n
}

// renderPage renders the page of site s for base ("scheme://authority/") and query.
func renderPage(s *site, base, host, query string) []byte {
	pr := s.routes.pageData()
	v := pageView{
		Repository: s.repository, Base: base, Host: host,
		ReleaseID: s.active.ID, Activated: s.active.ActivatedAt.UTC(), Built: pr.date,
		Suites: pr.suites, Query: query, Total: len(pr.packages),
		SourcesPath: aptsources.Path(s.repository),
	}
	v.ActivatedISO = v.Activated.Format(time.RFC3339)
	v.ActivatedText = v.Activated.Format("2006-01-02 15:04:05 UTC")
	signedBy := ""
	if _, ok := s.extra[s.repository+"-archive-keyring.gpg"]; ok {
		v.Keyring = s.repository + "-archive-keyring.gpg"
		v.KeyringPath = aptsources.KeyringPath(s.repository)
		signedBy = v.KeyringPath
	}
	if s.page != nil {
		v.Keys = s.page.views()
	}
	v.Sources = sourcesEntry(base, signedBy, pr.suites)
	v.Packages, v.Matched = matchPackages(pr.packages, query)
	v.Truncated = v.Matched > len(v.Packages)
	for _, e := range rootEntries(s) {
		href := url.PathEscape(e.name)
		if strings.IndexByte(href, ':') >= 0 {
			href = "./" + href
		}
		name := e.name
		if e.dir {
			name, href = name+"/", href+"/"
		}
		v.Files = append(v.Files, fileView{Name: name, Href: href})
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		// The template and its data are the edge's own: a failure is a bug.
		panic(fmt.Sprintf("render repository page: %v", err))
	}
	return b.Bytes()
}

// rootEntries are the entries of the root listing: the release's root and the keyrings.
func rootEntries(s *site) []dirEntry {
	var entries []dirEntry
	if d := s.routes.dirs[""]; d != nil {
		entries = d.entries
	}
	if len(s.extra) > 0 {
		entries = slices.Clone(entries)
		for name, r := range s.extra {
			if _, shadowed := s.routes.paths[name]; !shadowed {
				entries = append(entries, dirEntry{name: name, size: r.size})
			}
		}
		sortEntries(entries)
	}
	return entries
}
