package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// A generated repository: packages of few names, several versions and architectures,
// with alternatives, virtual packages, version constraints, conflicts and Multi-Arch,
// written as a Packages index. Names carry the case's prefix, so that many cases can
// share one dose-distcheck run without meeting.
var (
	genVersions = []string{"1", "1.5", "2", "2~rc1", "1:0.5", "2-1", "10"}
	genOps      = []string{"<<", "<=", "=", ">=", ">>"}
	genArchs    = []string{"amd64", "amd64", "amd64", "all", "i386"}
	genMA       = []string{"", "", "same", "foreign", "allowed"}
)

func genCase(r *rand.Rand, prefix string, essential bool) string {
	nReal, nVirt := 2+r.IntN(6), r.IntN(3)
	name := func() string {
		k := r.IntN(nReal + nVirt + 1)
		switch {
		case k < nReal:
			return fmt.Sprintf("%sp%d", prefix, k)
		case k < nReal+nVirt:
			return fmt.Sprintf("%sv%d", prefix, k-nReal)
		}
		return prefix + "missing"
	}
	rel := func(qualify bool) string {
		s := name()
		if qualify {
			switch r.IntN(10) {
			case 0:
				s += ":any"
			case 1:
				s += ":native"
			case 2:
				s += ":i386"
			}
		}
		if r.IntN(3) == 0 {
			s += fmt.Sprintf(" (%s %s)", genOps[r.IntN(len(genOps))], genVersions[r.IntN(len(genVersions))])
		}
		return s
	}
	list := func(n int, alts, qualify bool) string {
		var parts []string
		for range n {
			s := rel(qualify)
			for alts && r.IntN(3) == 0 {
				s += " | " + rel(qualify)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ", ")
	}
	var b strings.Builder
	seen := map[string]bool{}
	for i := range nReal {
		for range 1 + r.IntN(3) {
			v, a := genVersions[r.IntN(len(genVersions))], genArchs[r.IntN(len(genArchs))]
			// One package per name, version and architecture; "all" and an architecture
			// of one version would be one package to dpkg.
			id, other := fmt.Sprintf("%d %s %s", i, v, a), fmt.Sprintf("%d %s all", i, v)
			if a == "all" {
				other = fmt.Sprintf("%d %s arch", i, v)
			}
			if seen[id] || seen[other] {
				continue
			}
			seen[id] = true
			if a != "all" {
				seen[fmt.Sprintf("%d %s arch", i, v)] = true
			}
			fmt.Fprintf(&b, "Package: %sp%d\nVersion: %s\nArchitecture: %s\n", prefix, i, v, a)
			if ma := genMA[r.IntN(len(genMA))]; ma != "" && a != "all" {
				fmt.Fprintf(&b, "Multi-Arch: %s\n", ma)
			} else if ma == "foreign" || ma == "allowed" {
				fmt.Fprintf(&b, "Multi-Arch: %s\n", ma)
			}
			if essential && r.IntN(6) == 0 {
				b.WriteString("Essential: yes\n")
			}
			if n := r.IntN(4); n > 0 {
				fmt.Fprintf(&b, "Depends: %s\n", list(n, true, true))
			}
			if r.IntN(6) == 0 {
				fmt.Fprintf(&b, "Pre-Depends: %s\n", list(1, true, true))
			}
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, "Conflicts: %s\n", list(1+r.IntN(2), false, false))
			}
			if r.IntN(5) == 0 {
				fmt.Fprintf(&b, "Breaks: %s\n", list(1, false, false))
			}
			if nVirt > 0 && r.IntN(2) == 0 {
				var ps []string
				for range 1 + r.IntN(2) {
					p := fmt.Sprintf("%sv%d", prefix, r.IntN(nVirt))
					if r.IntN(3) == 0 {
						p += " (= " + genVersions[r.IntN(len(genVersions))] + ")"
					}
					ps = append(ps, p)
				}
				fmt.Fprintf(&b, "Provides: %s\n", strings.Join(ps, ", "))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
