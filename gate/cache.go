package gate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/debian/relation"
)

// cacheMagic heads an encoded package list; a change of the encoding changes it.
const cacheMagic = "armor gate packages 1\n"

// EncodePackages encodes packages as the build cache keeps them between builds, so that
// the next check need not read and parse their stanzas again: what the check reads of
// each, with its .deb's SHA-256.
func EncodePackages(pkgs []*Package) []byte {
	b := make([]byte, 0, len(pkgs)*160+len(cacheMagic))
	b = append(b, cacheMagic...)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	list := func(rs []relation.Relation) {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = r.String()
		}
		str(strings.Join(parts, ", "))
	}
	deps := func(rs [][]relation.Relation) {
		parts := make([]string, len(rs))
		for i, alts := range rs {
			parts[i] = relation.Alternatives(alts)
		}
		str(strings.Join(parts, ", "))
	}
	for _, p := range pkgs {
		str(p.SHA256)
		str(p.Name)
		str(p.Version)
		str(p.Architecture)
		ess := byte(0)
		if p.Essential {
			ess = 1
		}
		b = append(b, byte(p.MultiArch), ess)
		if p.lazy != nil {
			str(p.lazy[0])
			str(p.lazy[1])
		} else {
			deps(p.PreDepends)
			deps(p.Depends)
		}
		list(p.Conflicts)
		list(p.Breaks)
		list(p.Provides)
	}
	return b
}

// DecodePackages decodes what EncodePackages made, by SHA-256. Pre-Depends and Depends
// are parsed when first needed.
func DecodePackages(data []byte) (map[string]*Package, error) {
	if !strings.HasPrefix(string(data[:min(len(data), len(cacheMagic))]), cacheMagic) {
		return nil, errors.New("not a package cache of this version")
	}
	text := string(data[len(cacheMagic):]) // one copy; every field is a part of it
	out := map[string]*Package{}
	i := 0
	str := func() (string, error) {
		n, k := binary.Uvarint([]byte(text[i:min(len(text), i+10)]))
		if k <= 0 || uint64(len(text)-i-k) < n {
			return "", errors.New("truncated package cache")
		}
		s := text[i+k : i+k+int(n)]
		i += k + int(n)
		return s, nil
	}
	for i < len(text) {
		var f [11]string
		var err error
		for j := range 4 {
			if f[j], err = str(); err != nil {
				return nil, err
			}
		}
		if len(text)-i < 2 {
			return nil, errors.New("truncated package cache")
		}
		ma, ess := text[i], text[i+1]
		i += 2
		for j := 4; j < 9; j++ {
			if f[j], err = str(); err != nil {
				return nil, err
			}
		}
		p := &Package{SHA256: f[0], Name: f[1], Version: f[2], Architecture: f[3], MultiArch: MultiArch(ma), Essential: ess == 1, lazy: &[2]string{f[4], f[5]}}
		if p.Conflicts, err = relation.ParseList(f[6]); err == nil {
			if p.Breaks, err = relation.ParseList(f[7]); err == nil {
				p.Provides, err = relation.ParseList(f[8])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("package cache: %s: %w", p.Name, err)
		}
		out[p.SHA256] = p
	}
	return out, nil
}
