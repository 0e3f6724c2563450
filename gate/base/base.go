package base

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gate"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/ulikunitz/xz"
)

// Source is one base repository.
type Source struct {
	Spec string // as armor.toml gives it

	file string // a local Packages file
	url  string // a Packages file by URL
	// An APT source line.
	uri, suite string
	components []string
	keyrings   []string // signed-by; empty: the system's APT keyrings
	trusted    bool     // [trusted=yes]: no signature check
}

// Parse reads a base's spec: an APT source line ("deb ..."), an http(s) URL of a Packages
// file, or a path (relative to dir) of one.
func Parse(spec, dir string) (*Source, error) {
	s := &Source{Spec: spec}
	spec = strings.TrimSpace(spec)
	switch {
	case strings.HasPrefix(spec, "deb ") || strings.HasPrefix(spec, "deb\t"):
		return s, s.parseLine(spec, dir)
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		s.url = spec
	case spec == "":
		return nil, errors.New("base: empty entry")
	default:
		s.file = spec
		if !filepath.IsAbs(spec) {
			s.file = filepath.Join(dir, spec)
		}
	}
	return s, nil
}

// parseLine reads "deb [options] URI SUITE [COMPONENT...]".
func (s *Source) parseLine(line, dir string) error {
	rest := strings.TrimSpace(line[3:])
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return fmt.Errorf("base %q: options without a closing ']'", line)
		}
		for _, opt := range strings.Fields(rest[1:end]) {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "signed-by":
				for _, p := range strings.Split(v, ",") {
					if !filepath.IsAbs(p) {
						p = filepath.Join(dir, p)
					}
					s.keyrings = append(s.keyrings, p)
				}
			case "trusted":
				s.trusted = v == "yes"
			case "arch", "lang", "target", "pdiffs", "by-hash", "check-valid-until", "check-date", "inrelease-path":
			default:
				return fmt.Errorf("base %q: unknown option %q", line, k)
			}
		}
		rest = rest[end+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return fmt.Errorf("base %q: an APT source line needs a URI and a suite (deb URI SUITE COMPONENT...)", line)
	}
	s.uri, s.suite, s.components = strings.TrimSuffix(f[0], "/"), f[1], f[2:]
	if !strings.HasPrefix(s.uri, "http://") && !strings.HasPrefix(s.uri, "https://") && !strings.HasPrefix(s.uri, "file:") {
		return fmt.Errorf("base %q: the URI must be http, https or file", line)
	}
	flat := strings.HasSuffix(s.suite, "/")
	if flat != (len(s.components) == 0) {
		return fmt.Errorf("base %q: give components after a suite, or a suite ending in '/' (a flat repository) without", line)
	}
	return nil
}

// Loader reads bases, keeping what it fetches in Cache.
type Loader struct {
	Cache  string       // directory of the files fetched, by SHA-256
	Client *http.Client // nil: http.DefaultClient
	// Keyrings are read when an APT source line has no signed-by.
	SystemKeyrings []string
	// Warn is called when a fetch failed and a kept copy serves instead.
	Warn func(error)
}

// DefaultKeyrings are where apt finds its trusted keys.
var DefaultKeyrings = []string{"/etc/apt/trusted.gpg", "/etc/apt/trusted.gpg.d/*.gpg", "/etc/apt/trusted.gpg.d/*.asc"}

// Load returns the base's packages for the architecture, those of "all" with them.
func (l *Loader) Load(ctx context.Context, s *Source, arch string) ([]gate.Package, error) {
	datas, err := l.indexes(ctx, s, arch)
	if err != nil {
		return nil, fmt.Errorf("base %q: %w", s.Spec, err)
	}
	var out []gate.Package
	for _, d := range datas {
		pkgs, err := gate.ReadPackages(d.data, "base "+d.name)
		if err != nil {
			return nil, fmt.Errorf("base %q: %w", s.Spec, err)
		}
		out = append(out, pkgs...)
	}
	return out, nil
}

type index struct {
	name string
	data []byte
}

func (l *Loader) indexes(ctx context.Context, s *Source, arch string) ([]index, error) {
	switch {
	case s.file != "":
		data, err := os.ReadFile(s.file)
		if err != nil {
			return nil, err
		}
		plain, err := Decompress(s.file, data)
		return []index{{s.file, plain}}, err
	case s.url != "":
		data, err := l.fetchURL(ctx, s.url)
		if err != nil {
			return nil, err
		}
		plain, err := Decompress(s.url, data)
		return []index{{s.url, plain}}, err
	}
	return l.aptIndexes(ctx, s, arch)
}

// aptIndexes fetches and verifies the suite's Release, then each component's Packages
// for arch (and for "all" when the Release lists it apart).
func (l *Loader) aptIndexes(ctx context.Context, s *Source, arch string) ([]index, error) {
	dist := s.uri + "/dists/" + s.suite
	if strings.HasSuffix(s.suite, "/") {
		dist = s.uri + "/" + strings.TrimSuffix(s.suite, "/")
	}
	inrel, err := l.get(ctx, dist+"/InRelease")
	if err != nil {
		return nil, err
	}
	text := inrel
	if !s.trusted {
		keyrings, err := l.keyrings(s)
		if err != nil {
			return nil, err
		}
		if text, _, err = sign.VerifyClearsigned(inrel, keyrings...); err != nil {
			return nil, fmt.Errorf("%s/InRelease: %w", dist, err)
		}
	} else if plain, _, err := splitClearsigned(inrel); err == nil {
		text = plain
	}
	rel, err := release.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s/InRelease: %w", dist, err)
	}
	comps := s.components
	if len(comps) == 0 {
		comps = []string{""}
	}
	archs := []string{arch, "all"}
	if rel.Field("No-Support-for-Architecture-all") == "Packages" {
		archs = archs[:1] // each architecture's index lists the "all" packages, as apt reads it
	}
	var out []index
	for _, comp := range comps {
		for _, a := range archs {
			dir := comp + "/binary-" + a + "/"
			if comp == "" {
				dir = ""
			}
			data, name, err := l.fromRelease(ctx, dist, rel, dir+"Packages")
			if errors.Is(err, errNotListed) {
				if a == "all" {
					continue // binary-all is optional: most suites list "all" packages in each architecture's index
				}
				return nil, fmt.Errorf("%s: the Release lists no %sPackages", dist, dir)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, index{name, data})
		}
	}
	return out, nil
}

var errNotListed = errors.New("not listed")

// fromRelease returns the uncompressed index the Release lists at path, from the cache
// or fetched in its first compressed form the Release lists.
func (l *Loader) fromRelease(ctx context.Context, dist string, rel *release.File, path string) ([]byte, string, error) {
	for _, ext := range []string{".xz", ".gz", ""} {
		d, ok := rel.Sums[path+ext]
		if !ok || d.SHA256 == "" {
			continue
		}
		url := dist + "/" + path + ext
		data, err := l.cached(d.SHA256)
		if err != nil {
			if data, err = l.get(ctx, url); err != nil {
				return nil, "", err
			}
			if sum := sha256Hex(data); sum != d.SHA256 || int64(len(data)) != d.Size {
				return nil, "", fmt.Errorf("%s: got %d bytes with SHA-256 %s, the signed Release says %d bytes with %s", url, len(data), sum, d.Size, d.SHA256)
			}
			l.keep(d.SHA256, data)
		}
		plain, err := Decompress(url, data)
		return plain, url, err
	}
	return nil, "", errNotListed
}

func (l *Loader) keyrings(s *Source) ([][]byte, error) {
	paths := s.keyrings
	if len(paths) == 0 {
		globs := l.SystemKeyrings
		if globs == nil {
			globs = DefaultKeyrings
		}
		for _, g := range globs {
			m, _ := filepath.Glob(g)
			paths = append(paths, m...)
		}
		if len(paths) == 0 {
			return nil, errors.New("no signed-by in the source line, and no APT keyring on this machine to verify its InRelease with")
		}
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
		out = append(out, data)
	}
	return out, nil
}

// splitClearsigned returns the text of a clear-signed message without checking it.
func splitClearsigned(data []byte) ([]byte, bool, error) {
	const begin = "-----BEGIN PGP SIGNED MESSAGE-----"
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte(begin)) {
		return data, false, nil
	}
	_, body, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		return nil, false, errors.New("malformed clear-signed message")
	}
	text, _, _ := bytes.Cut(body, []byte("\n-----BEGIN PGP SIGNATURE-----"))
	return append(bytes.ReplaceAll(text, []byte("\n- "), []byte("\n")), '\n'), true, nil
}

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// cached returns the kept file with the digest.
func (l *Loader) cached(sum string) ([]byte, error) {
	if l.Cache == "" {
		return nil, os.ErrNotExist
	}
	data, err := os.ReadFile(filepath.Join(l.Cache, sum))
	if err != nil {
		return nil, err
	}
	if sha256Hex(data) != sum {
		return nil, fmt.Errorf("kept copy %s is damaged", sum)
	}
	return data, nil
}

// keep stores a fetched file under its digest; a failure only costs a fetch next time.
func (l *Loader) keep(sum string, data []byte) {
	if l.Cache == "" {
		return
	}
	if err := os.MkdirAll(l.Cache, 0o755); err == nil {
		_ = atomicfile.WriteFile(filepath.Join(l.Cache, sum), data, 0o644)
	}
}

func (l *Loader) client() *http.Client {
	if l.Client != nil {
		return l.Client
	}
	return http.DefaultClient
}

// get fetches a URL (http, https or file:).
func (l *Loader) get(ctx context.Context, url string) ([]byte, error) {
	if p, ok := strings.CutPrefix(url, "file:"); ok {
		return os.ReadFile(strings.TrimPrefix(p, "//"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := l.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// urlState is what is kept of a Packages file named by URL: its validators and digest.
type urlState struct {
	ETag, LastModified, SHA256 string
	Fetched                    time.Time
}

// fetchURL fetches a Packages file by URL, conditionally when a copy is kept.
func (l *Loader) fetchURL(ctx context.Context, url string) ([]byte, error) {
	statePath := ""
	var st urlState
	var kept []byte
	if l.Cache != "" {
		statePath = filepath.Join(l.Cache, "url-"+sha256Hex([]byte(url))+".json")
		if b, err := os.ReadFile(statePath); err == nil && json.Unmarshal(b, &st) == nil {
			kept, _ = l.cached(st.SHA256)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if kept != nil {
		if st.ETag != "" {
			req.Header.Set("If-None-Match", st.ETag)
		}
		if st.LastModified != "" {
			req.Header.Set("If-Modified-Since", st.LastModified)
		}
	}
	resp, err := l.client().Do(req)
	if err != nil {
		return l.fallback(kept, fmt.Errorf("GET %s: %w", url, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && kept != nil:
		return kept, nil
	case resp.StatusCode != http.StatusOK:
		return l.fallback(kept, fmt.Errorf("GET %s: %s", url, resp.Status))
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return l.fallback(kept, fmt.Errorf("GET %s: %w", url, err))
	}
	st = urlState{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), SHA256: sha256Hex(data), Fetched: time.Now().UTC()}
	l.keep(st.SHA256, data)
	if statePath != "" {
		if b, err := json.Marshal(st); err == nil {
			_ = atomicfile.WriteFile(statePath, b, 0o644)
		}
	}
	return data, nil
}

// fallback serves the kept copy after a failed fetch, warning, or fails without one.
func (l *Loader) fallback(kept []byte, err error) ([]byte, error) {
	if kept == nil {
		return nil, err
	}
	if l.Warn != nil {
		l.Warn(fmt.Errorf("%w; using the copy kept from before", err))
	}
	return kept, nil
}

// Decompress undoes .xz or .gz compression, by name or by magic number.
func Decompress(name string, data []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		r, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return out, nil
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return out, nil
	}
	if slices.Contains([]string{".xz", ".gz", ".bz2", ".zst", ".lz4"}, filepath.Ext(name)) {
		return nil, fmt.Errorf("%s: not in a compressed form this reader knows (xz or gzip)", name)
	}
	return data, nil
}
