package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/internal/tomlfile"

	"github.com/armor-apt/armor/internal/hostname"
)

// File is armor.toml.
type File struct {
	// Date, when set, is the date of every build (RFC 3339, or Unix seconds), as
	// SOURCE_DATE_EPOCH gives it, which wins over it: with the same inputs and key, a
	// build then makes the same tree, signatures and manifest id anywhere.
	Date       string     `toml:"date,omitempty"`
	Repository Repository `toml:"repository"`
	Suites     []Suite    `toml:"suite"`
	Signing    Signing    `toml:"signing"`
	Output     Output     `toml:"output"`
	Store      Store      `toml:"store"`
	Controld   Controld   `toml:"controld"`

	// Path is the file it was read from; relative paths in it are relative to its
	// directory.
	Path string `toml:"-"`
}

// Repository is the repository's identity.
type Repository struct {
	Name        string   `toml:"name"`
	Origin      string   `toml:"origin"`
	Label       string   `toml:"label"`
	Description string   `toml:"description"`
	Hostnames   []string `toml:"hostnames"`
	// HTTPS says the edges serve the hostnames over HTTPS (edged's tls_listen): the
	// .sources entry of the keyring package then names https, as the page does.
	HTTPS bool `toml:"https,omitempty"`
	// Retention is how long edges keep serving by-hash and pool paths of releases that
	// were active recently ("48h", "7d"). Empty: controld's default.
	Retention string `toml:"retention,omitempty"`
}

// Suite is one distribution, published at dists/<codename>/.
type Suite struct {
	Codename      string              `toml:"codename"`
	Suite         string              `toml:"suite,omitempty"`
	Description   string              `toml:"description,omitempty"`
	Components    []string            `toml:"components"`
	Architectures []string            `toml:"architectures"`
	ValidFor      string              `toml:"valid_for,omitempty"`
	Inputs        map[string][]string `toml:"inputs"`
	// AllowEmpty lets an input pattern match no file. Without it, a pattern that matches
	// nothing fails the build: a typo, or .deb files not in place yet, would otherwise
	// publish a signed release without those packages.
	AllowEmpty bool `toml:"allow_empty,omitempty"`
	// Sync makes the suite mirror its input directories: a package whose file is gone is
	// removed. By default the parent release is the truth and inputs only add packages.
	Sync bool `toml:"sync,omitempty"`
	// MaxRemovals is the share of a syncing suite's packages one build may remove
	// without --allow-removals, in percent ("10%", the default) or "100%" for no limit.
	MaxRemovals string `toml:"max_removals,omitempty"`
	// KeepVersions, when positive, keeps only the newest N versions of each package.
	KeepVersions int `toml:"keep_versions,omitempty"`
	// NotAutomatic and ButAutomaticUpgrades go into Release, for a backports-style suite.
	NotAutomatic         bool `toml:"not_automatic,omitempty"`
	ButAutomaticUpgrades bool `toml:"but_automatic_upgrades,omitempty"`
	// Check says what a build does with packages that cannot be installed: "refuse",
	// "warn" or "off". armor init writes "refuse"; absent, it is "warn" (DefaultCheck).
	Check string `toml:"check,omitempty"`
	// Base names the repositories the suite's packages are installed on (paths or URLs of
	// Packages files, or APT source lines), for the check to resolve what it lacks.
	Base []string `toml:"base,omitempty"`
}

// DefaultCheck is the check policy of a suite whose armor.toml says none: a
// configuration written before the check existed keeps building, and its builds say what
// cannot be installed, rather than failing on an upgrade of armor for packages that were
// published that way all along. armor init writes check = "refuse" for new repositories.
const DefaultCheck = "warn"

// CheckPolicy returns the suite's check policy, the default when unset.
func (s Suite) CheckPolicy() string {
	if s.Check == "" {
		return DefaultCheck
	}
	return s.Check
}

// RemovalShare returns MaxRemovals as a share from 0 to 1; 0 when unset.
func (s Suite) RemovalShare() (float64, error) {
	if s.MaxRemovals == "" {
		return 0, nil
	}
	num, ok := strings.CutSuffix(strings.TrimSpace(s.MaxRemovals), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || v <= 0 || v > 100 {
		return 0, fmt.Errorf("max_removals %q: use a percentage above 0, at most 100%%, such as \"10%%\"", s.MaxRemovals)
	}
	return v / 100, nil
}

// Signing names the secret key and where its passphrase comes from. The environment
// overrides both (see SigningKey and Passphrase), so Key may be empty when every build
// gets the key from $ARMOR_SIGNING_KEY or $ARMOR_SIGNING_KEY_FILE.
type Signing struct {
	Key string `toml:"key,omitempty"`
	// NextKey, during a change of keys (armor key rotate), is the new key, which signs
	// beside Key; $ARMOR_NEXT_SIGNING_KEY or $ARMOR_NEXT_SIGNING_KEY_FILE win over it.
	// It takes the same passphrase as Key. Its presence says a change of keys is under
	// way: the variables set without it do not add a key (armor build refuses them, or
	// warns when they hold the signing key itself).
	NextKey        string `toml:"next_key,omitempty"`
	PassphraseEnv  string `toml:"passphrase_env,omitempty"`
	PassphraseFile string `toml:"passphrase_file,omitempty"`
	Digest         string `toml:"digest,omitempty"`
}

// Output says where build writes.
type Output struct {
	Tree     string `toml:"tree,omitempty"`
	Manifest string `toml:"manifest,omitempty"`
	Cache    string `toml:"cache,omitempty"`
	// PoolFiles says how a pool file is made from its input: "copy" (the default) copies
	// it, so that nothing done to the input later changes the tree (a file system with
	// copy-on-write clones it in place of the copy); "link" makes it a hard link to the
	// input where the file system allows, and copies it otherwise.
	PoolFiles string `toml:"pool_files,omitempty"`
}

// check refuses an output setting that names no known way.
func (o *Output) check() error {
	switch o.PoolFiles {
	case "", "link", "copy":
		return nil
	}
	return fmt.Errorf("output.pool_files %q: use \"copy\" (the default) or \"link\" (a hard link to the input where the file system allows)", o.PoolFiles)
}

// Store is where push uploads: an rclone remote, or S3 settings from which one is made.
type Store struct {
	// Remote is any rclone path: a local directory, "name:bucket/prefix" for a remote in
	// rclone.conf, or a connection string ":s3,provider=...:bucket/prefix".
	Remote string `toml:"remote,omitempty"`
	S3     *S3    `toml:"s3,omitempty"`
}

// S3 configures an S3-compatible bucket. Credentials are not here: they come from the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE...).
type S3 struct {
	Provider string `toml:"provider,omitempty"` // AWS, Cloudflare, Minio, Rclone, Other...
	Endpoint string `toml:"endpoint,omitempty"`
	Region   string `toml:"region,omitempty"`
	Bucket   string `toml:"bucket"`
	Prefix   string `toml:"prefix,omitempty"`
}

// Controld says where push records releases.
type Controld struct {
	URL       string `toml:"url,omitempty"`
	TokenEnv  string `toml:"token_env,omitempty"`
	TokenFile string `toml:"token_file,omitempty"`
}

// Defaults.
const (
	DefaultTree     = "public"
	DefaultManifest = "manifest.toml"
	DefaultCache    = ".armor/cache"
	DefaultTokenEnv = "ARMOR_TOKEN"
	DefaultDigest   = "SHA512"
)

// Load reads and validates armor.toml.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes armor.toml strictly and validates it. path names the file in errors and
// anchors its relative paths.
func Parse(data []byte, path string) (*File, error) {
	var f File
	if err := tomlfile.Decode(data, path, &f); err != nil {
		return nil, err
	}
	f.Path = path
	f.setDefaults()
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

func (f *File) setDefaults() {
	if f.Output.Tree == "" {
		f.Output.Tree = DefaultTree
	}
	if f.Output.Manifest == "" {
		f.Output.Manifest = DefaultManifest
	}
	if f.Output.Cache == "" {
		f.Output.Cache = DefaultCache
	}
	if f.Signing.Digest == "" {
		f.Signing.Digest = DefaultDigest
	}
	if f.Controld.TokenEnv == "" {
		f.Controld.TokenEnv = DefaultTokenEnv
	}
	if f.Repository.Origin == "" {
		f.Repository.Origin = f.Repository.Name
	}
	if f.Repository.Label == "" {
		f.Repository.Label = f.Repository.Origin
	}
	for i := range f.Suites {
		if f.Suites[i].Suite == "" {
			f.Suites[i].Suite = f.Suites[i].Codename
		}
	}
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// A Release field value must be one line.
	lineRE = regexp.MustCompile(`^[^\n\r]*$`)
	archRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

func (f *File) validate() error {
	if err := f.Repository.validate(); err != nil {
		return err
	}
	if f.Date != "" {
		if _, err := ParseDate(f.Date); err != nil {
			return err
		}
	}
	if len(f.Suites) == 0 {
		return errors.New("no [[suite]] configured")
	}
	for i := range f.Suites {
		if err := f.validateSuite(i); err != nil {
			return err
		}
	}
	if f.Signing.PassphraseEnv != "" && f.Signing.PassphraseFile != "" {
		return errors.New("signing: set either passphrase_env or passphrase_file, not both")
	}
	switch strings.ToUpper(f.Signing.Digest) {
	case "SHA256", "SHA512":
	default:
		return fmt.Errorf("signing.digest %q: use SHA256 or SHA512", f.Signing.Digest)
	}
	if err := cmp.Or(f.checkTree(), f.Output.check()); err != nil {
		return err
	}
	if f.Store.Remote != "" && f.Store.S3 != nil {
		return errors.New("store: set either remote or [store.s3], not both")
	}
	if f.Store.S3 != nil && f.Store.S3.Bucket == "" {
		return errors.New("store.s3.bucket is empty")
	}
	return nil
}

// validate checks the [repository] table and normalises its hostnames in place.
func (r *Repository) validate() error {
	if !nameRE.MatchString(r.Name) {
		return fmt.Errorf("repository.name %q: use lowercase letters, digits, '.', '_' or '-'", r.Name)
	}
	for _, f := range []struct{ name, value string }{{"origin", r.Origin}, {"label", r.Label}, {"description", r.Description}} {
		if !lineRE.MatchString(f.value) {
			return fmt.Errorf("repository.%s must be a single line", f.name)
		}
	}
	seen := map[string]int{}
	written := slices.Clone(r.Hostnames)
	for i, h := range written {
		n, err := hostname.Normalize(h)
		if err != nil {
			return fmt.Errorf("repository.hostnames[%d]: %w", i, err)
		}
		if j, dup := seen[n]; dup {
			return fmt.Errorf("repository.hostnames: %q (entry %d) and %q (entry %d) are the same host %s", written[j], j+1, h, i+1, n)
		}
		seen[n] = i
		r.Hostnames[i] = n
	}
	if r.Retention != "" {
		if _, err := PositiveDuration(r.Retention); err != nil {
			return fmt.Errorf("repository.retention: %w", err)
		}
	}
	return nil
}

// validateSuite checks the i-th [[suite]] against itself and against the suites
// before it.
func (f *File) validateSuite(i int) error {
	s := f.Suites[i]
	where := fmt.Sprintf("suite %d (%s)", i+1, s.Codename)
	if !nameRE.MatchString(s.Codename) {
		return fmt.Errorf("%s: codename %q: use lowercase letters, digits, '.', '_' or '-'", where, s.Codename)
	}
	if slices.ContainsFunc(f.Suites[:i], func(o Suite) bool { return o.Codename == s.Codename }) {
		return fmt.Errorf("%s: codename %q is configured twice", where, s.Codename)
	}
	if !lineRE.MatchString(s.Description) {
		// A line break would end the Release file's field, or its paragraph.
		return fmt.Errorf("%s: description must be a single line", where)
	}
	if !nameRE.MatchString(s.Suite) {
		return fmt.Errorf("%s: suite %q: use lowercase letters, digits, '.', '_' or '-'", where, s.Suite)
	}
	// dists/<suite> is published too: it must name this suite only.
	for j, o := range f.Suites {
		if j != i && (o.Codename == s.Suite || (o.Suite == s.Suite && j < i)) {
			return fmt.Errorf("%s: suite %q is also the name of suite %d (%s): each name publishes dists/<name>/", where, s.Suite, j+1, o.Codename)
		}
	}
	if s.ButAutomaticUpgrades && !s.NotAutomatic {
		return fmt.Errorf("%s: but_automatic_upgrades needs not_automatic = true", where)
	}
	if len(s.Components) == 0 {
		return fmt.Errorf("%s: components is empty", where)
	}
	for _, c := range s.Components {
		// Debian allows components such as "updates/main": each part must be a name.
		for _, seg := range strings.Split(c, "/") {
			if !nameRE.MatchString(seg) {
				return fmt.Errorf("%s: component %q is not a valid name", where, c)
			}
		}
	}
	if len(s.Architectures) == 0 {
		return fmt.Errorf("%s: architectures is empty", where)
	}
	for _, a := range s.Architectures {
		if !archRE.MatchString(a) || a == "all" || a == "source" {
			return fmt.Errorf("%s: architecture %q is not a binary architecture", where, a)
		}
	}
	for comp := range s.Inputs {
		if !slices.Contains(s.Components, comp) {
			return fmt.Errorf("%s: inputs.%s: component %q is not in components %v", where, comp, comp, s.Components)
		}
	}
	if _, err := s.RemovalShare(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if s.MaxRemovals != "" && !s.Sync {
		return fmt.Errorf("%s: max_removals applies only to a suite with sync = true", where)
	}
	switch s.Check {
	case "", "refuse", "warn", "off":
	default:
		return fmt.Errorf("%s: check %q: use \"refuse\", \"warn\" or \"off\"", where, s.Check)
	}
	for j, b := range s.Base {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("%s: base[%d] is empty: give a path or URL of a Packages file, or an APT source line", where, j)
		}
	}
	if s.KeepVersions < 0 {
		return fmt.Errorf("%s: keep_versions %d: use a positive number of versions, or leave it out to keep all", where, s.KeepVersions)
	}
	if s.ValidFor != "" {
		if _, err := PositiveDuration(s.ValidFor); err != nil {
			return fmt.Errorf("%s: valid_for: %w", where, err)
		}
	}
	return nil
}

// checkTree refuses an output.tree that is the root directory, the project directory
// or one of its parents: a build writes dists/ and pool/ there and deletes what an old
// release left in them, so such a tree would scatter the repository over the project
// (or the whole machine). Symbolic links are followed where the paths exist.
func (f *File) checkTree() error {
	dir, err := filepath.Abs(f.Dir())
	if err != nil {
		return fmt.Errorf("output.tree: %w", err)
	}
	tree, err := filepath.Abs(f.Resolve(f.Output.Tree))
	if err != nil {
		return fmt.Errorf("output.tree: %w", err)
	}
	resolved, what := tree, treeOver(tree, dir)
	if what == "" {
		realTree, err1 := filepath.EvalSymlinks(tree)
		realDir, err2 := filepath.EvalSymlinks(dir)
		if err1 == nil && err2 == nil {
			resolved = fmt.Sprintf("%s (%s through symbolic links)", tree, realTree)
			what = treeOver(realTree, realDir)
		}
	}
	if what != "" {
		return fmt.Errorf("output.tree %q resolves to %s, %s: a build writes dists/ and pool/ there; give the tree a directory of its own, such as %q",
			f.Output.Tree, resolved, what, DefaultTree)
	}
	return nil
}

// treeOver says why tree may not hold a build of the project in dir ("" when it may).
// Both paths are absolute and clean.
func treeOver(tree, dir string) string {
	switch {
	case tree == string(filepath.Separator):
		return "the root directory"
	case tree == dir:
		return "the project directory"
	case strings.HasPrefix(dir, tree+string(filepath.Separator)):
		return "a parent of the project directory " + dir
	}
	return ""
}

// Resolve makes a path from the file absolute, relative to the file's directory.
func (f *File) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(f.Path), p)
}

// Dir is the directory holding armor.toml.
func (f *File) Dir() string { return filepath.Dir(f.Path) }

// Remote returns the rclone remote push uploads to, "" when no store is configured.
// A relative local path is resolved against the file's directory.
func (f *File) Remote() string {
	if s3 := f.Store.S3; s3 != nil {
		var opts []string
		add := func(k, v string) {
			if v != "" {
				opts = append(opts, k+"="+quoteOpt(v))
			}
		}
		add("provider", s3.Provider)
		add("endpoint", s3.Endpoint)
		add("region", s3.Region)
		opts = append(opts, "env_auth=true")
		root := s3.Bucket
		if s3.Prefix != "" {
			root += "/" + strings.Trim(s3.Prefix, "/")
		}
		return ":s3," + strings.Join(opts, ",") + ":" + root
	}
	r := f.Store.Remote
	if r == "" || isRcloneRemote(r) {
		return r
	}
	return f.Resolve(r)
}

// isRcloneRemote reports whether r names a remote ("name:path" or ":backend:path")
// rather than a local path.
func isRcloneRemote(r string) bool {
	if strings.HasPrefix(r, ":") {
		return true
	}
	i := strings.IndexByte(r, ':')
	return i > 0 && !strings.ContainsAny(r[:i], `/\`)
}

func quoteOpt(v string) string {
	if strings.ContainsAny(v, ",:='\"") {
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return v
}

// PositiveDuration reads a duration in armor's one syntax ("7d", "48h", "90m") that
// must be longer than zero, as a retention window or a Valid-Until span must.
func PositiveDuration(s string) (time.Duration, error) {
	d, err := duration.Parse(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as \"7d\" or \"36h\"", s)
	}
	return d, nil
}

// Token returns controld's token from the token file or environment variable.
func (f *File) Token() (string, error) {
	if p := f.Controld.TokenFile; p != "" {
		data, err := os.ReadFile(f.Resolve(p))
		if err != nil {
			return "", fmt.Errorf("read controld.token_file: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	return os.Getenv(f.Controld.TokenEnv), nil
}

// ParseDate reads a build date: RFC 3339 ("2026-01-01T00:00:00Z") or Unix seconds.
func ParseDate(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("date %q: use RFC 3339 (\"2026-01-01T00:00:00Z\") or Unix seconds", s)
	}
	return t.UTC().Truncate(time.Second), nil
}
