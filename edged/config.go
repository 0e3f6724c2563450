package edged

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/internal/tomlfile"
)

// DefaultACMECA is the ACME directory certificates come from unless acme_ca says
// otherwise: Let's Encrypt's production one.
const DefaultACMECA = "https://acme-v02.api.letsencrypt.org/directory"

// The ACME challenges acme_challenge can choose.
const (
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
)

// The places acme_storage can name.
const (
	StorageLocal    = "local"
	StorageControld = "controld"
)

// TokenEnv is the environment variable holding controld's read-only token when no
// token_file is configured. The token never goes in the config file itself.
const TokenEnv = "ARMOR_EDGE_TOKEN"

// Config is edged's configuration, read from TOML by LoadConfig. The zero value of each
// field means its default (see Defaults).
type Config struct {
	// Listen is the address of the public (apt-facing) listener.
	Listen string `toml:"listen"`
	// AdminListen is the address of the admin listener (/healthz, /metrics).
	AdminListen string `toml:"admin_listen"`
	// Controld is controld's base URL, e.g. "http://127.0.0.1:7380", or the replicas'
	// URLs, comma-separated: a poll that one does not answer moves to the next.
	Controld string `toml:"controld"`
	// TokenFile holds controld's read-only token (one line). When empty the token comes
	// from the ARMOR_EDGE_TOKEN environment variable.
	TokenFile string `toml:"token_file"`
	// Token is the token itself; it is never read from the file (tests and embedders
	// set it directly).
	Token string `toml:"-"`
	// Store is the object store as an rclone remote string (used by Run only).
	Store string `toml:"store"`
	// CacheSize bounds the in-memory object cache (sum of object sizes).
	CacheSize ByteSize `toml:"cache_size"`
	// StreamThreshold: objects larger than this are served from the disk cache, never
	// held whole in memory.
	StreamThreshold ByteSize `toml:"stream_threshold"`
	// StateDir keeps the last applied routes and their manifests across restarts.
	// Empty disables persistence.
	StateDir string `toml:"state_dir"`
	// DiskCache holds the objects larger than StreamThreshold, each fetched from the
	// store into it and checked against its SHA-256 before it is served (disk.go).
	// Default: <state_dir>/objects; with no state_dir, a temporary directory removed
	// when the edge closes.
	DiskCache string `toml:"disk_cache"`
	// DiskCacheSize bounds the disk cache (sum of object sizes); least recently used
	// objects go first. An object larger than it is fetched for each request.
	DiskCacheSize ByteSize `toml:"disk_cache_size"`
	// AccessLog is "" (off), "-" (standard output) or a file path (appended to), written
	// as one slog JSON object per request.
	AccessLog string `toml:"access_log"`
	// FetchTimeout bounds one whole-object fetch from the store.
	FetchTimeout duration.Duration `toml:"fetch_timeout"`
	// RequestTimeout is how long a client has to send a whole request, from connecting
	// or from the end of the previous response: a keep-alive connection idle for longer
	// is closed, and a request still incomplete gets 408. In Go's poller fasthttp
	// enforces it (ReadTimeout and IdleTimeout), and a request on a keep-alive
	// connection has it again from its first byte; with ConnPoller "edged" the
	// connections enforce it, within a quarter of itself (at most a second) and 100 ms
	// after it passes.
	RequestTimeout duration.Duration `toml:"request_timeout"`
	// ShutdownTimeout bounds the graceful shutdown of each listener.
	ShutdownTimeout duration.Duration `toml:"shutdown_timeout"`
	// ConnPoller is what public connections wait in: "go" (the default), the Go
	// runtime's poller, or "edged", the opt-in poller of package connpoll, an epoll
	// instance of edged's own that serves ready connections first in, first out (a
	// lower latency tail under load). Outside Linux it is always "go".
	ConnPoller string `toml:"conn_poller"`
	// TLSListen is the address of the public HTTPS listener; "" (the default) serves
	// plain HTTP only. Each routed hostname gets a certificate from ACME the first time a
	// client asks for it by SNI (tls.go); a hostname the routes feed does not list never
	// gets one. Plain HTTP on Listen stays on: apt needs no HTTPS (InRelease is signed),
	// and the CA's HTTP-01 validation is answered there.
	TLSListen string `toml:"tls_listen"`
	// ACMECA is the ACME directory URL that certificates come from (Let's Encrypt's
	// production directory by default). Setting tls_listen agrees to its terms.
	ACMECA string `toml:"acme_ca"`
	// ACMEEmail is the contact address of the ACME account; "" registers none.
	ACMEEmail string `toml:"acme_email"`
	// ACMECARoot is a PEM file of root certificates to trust for acme_ca's own HTTPS,
	// for a private CA (such as pebble in tests); "" trusts the system's roots.
	ACMECARoot string `toml:"acme_ca_root"`
	// ACMEStorage is where certificates, their keys, the ACME account and the
	// challenge tokens are kept: "local" (the default), under state_dir/acme, for an
	// edge of its own; "controld", in controld's state database (a copy stays under
	// state_dir/acme for when controld does not answer), shared by every edge whose
	// token has the certs action on "*". Edges behind one name then hold one
	// certificate per hostname, one of them orders and renews it while the others wait
	// on its lock, and any of them answers the CA's challenge.
	ACMEStorage string `toml:"acme_storage"`
	// ACMELockTTL is how long a lock of the shared storage outlives its edge: the
	// holder renews it every third of that while it lives, so an edge that dies while
	// ordering holds the order back for at most this long (30s).
	ACMELockTTL duration.Duration `toml:"acme_lock_ttl"`
	// ACMERenewInterval is how often the certificates held are checked for renewal
	// (10m, as Caddy's renew_interval): one that expires within a third of its lifetime,
	// or within five intervals, is renewed.
	ACMERenewInterval duration.Duration `toml:"acme_renew_interval"`
	// ACMEChallenge limits validation to one challenge: "http-01" (the CA connects to
	// port 80, the plain listener) or "tls-alpn-01" (port 443, the HTTPS listener).
	// "" (the default) offers both.
	ACMEChallenge string `toml:"acme_challenge"`
	// Poll tunes the long poll of controld's routes feed.
	Poll PollConfig `toml:"poll"`
}

// PollConfig tunes the long poll of controld's routes feed.
type PollConfig struct {
	// Wait is the long-poll duration asked of controld (at most 60s).
	Wait duration.Duration `toml:"wait"`
	// BackoffMin and BackoffMax bound the exponential backoff after an error.
	BackoffMin duration.Duration `toml:"backoff_min"`
	BackoffMax duration.Duration `toml:"backoff_max"`
	// StaleAfter is how long polling may keep failing before /healthz reports controld
	// unreachable (the edge serves its last known routes meanwhile).
	StaleAfter duration.Duration `toml:"stale_after"`
}

// Defaults returns the configuration used for every field left unset.
func Defaults() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		AdminListen:       "127.0.0.1:9090",
		CacheSize:         512 * MiB,
		StreamThreshold:   8 * MiB,
		DiskCacheSize:     8 * GiB,
		StateDir:          "/var/lib/armor/edged",
		FetchTimeout:      duration.Duration(2 * time.Minute),
		RequestTimeout:    duration.Duration(60 * time.Second),
		ShutdownTimeout:   duration.Duration(10 * time.Second),
		ConnPoller:        "go",
		ACMECA:            DefaultACMECA,
		ACMEStorage:       StorageLocal,
		ACMELockTTL:       duration.Duration(30 * time.Second),
		ACMERenewInterval: duration.Duration(10 * time.Minute),
		Poll: PollConfig{
			Wait:       duration.Duration(30 * time.Second),
			BackoffMin: duration.Duration(500 * time.Millisecond),
			BackoffMax: duration.Duration(30 * time.Second),
			StaleAfter: duration.Duration(2 * time.Minute),
		},
	}
}

// LoadConfig reads the TOML file at path strictly: an unknown key or a malformed value
// is an error naming the file and line. Unset fields take their Defaults.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read edged config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig is LoadConfig on bytes already in memory; name labels errors.
func ParseConfig(data []byte, name string) (Config, error) {
	cfg := Defaults()
	if err := tomlfile.Decode(data, "edged config "+name, &cfg); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("edged config %s: %w", name, err)
	}
	return cfg, nil
}

// withDefaults fills every zero field from Defaults.
func (c Config) withDefaults() Config {
	d := Defaults()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&c.Listen, d.Listen)
	set(&c.AdminListen, d.AdminListen)
	set(&c.ConnPoller, d.ConnPoller)
	set(&c.ACMECA, d.ACMECA)
	set(&c.ACMEStorage, d.ACMEStorage)
	if c.CacheSize == 0 {
		c.CacheSize = d.CacheSize
	}
	if c.StreamThreshold == 0 {
		c.StreamThreshold = d.StreamThreshold
	}
	if c.DiskCacheSize == 0 {
		c.DiskCacheSize = d.DiskCacheSize
	}
	durations := []struct{ v, def *duration.Duration }{
		{&c.FetchTimeout, &d.FetchTimeout},
		{&c.RequestTimeout, &d.RequestTimeout},
		{&c.ShutdownTimeout, &d.ShutdownTimeout},
		{&c.ACMELockTTL, &d.ACMELockTTL},
		{&c.ACMERenewInterval, &d.ACMERenewInterval},
		{&c.Poll.Wait, &d.Poll.Wait},
		{&c.Poll.BackoffMin, &d.Poll.BackoffMin},
		{&c.Poll.BackoffMax, &d.Poll.BackoffMax},
		{&c.Poll.StaleAfter, &d.Poll.StaleAfter},
	}
	for _, x := range durations {
		if *x.v == 0 {
			*x.v = *x.def
		}
	}
	return c
}

// Validate checks the values that have no sensible reading: a bad controld URL, sizes
// and durations out of range.
func (c Config) Validate() error {
	if c.Controld == "" {
		return errors.New("controld: the controld URL is required")
	}
	for _, r := range controldURLs(c.Controld) {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("controld: %q is not an http(s) URL (several replicas: a comma-separated list)", r)
		}
	}
	if c.CacheSize < 0 {
		return fmt.Errorf("cache_size: %d is negative", c.CacheSize)
	}
	if c.StreamThreshold < 0 {
		return fmt.Errorf("stream_threshold: %d is negative", c.StreamThreshold)
	}
	if c.DiskCacheSize < 0 {
		return fmt.Errorf("disk_cache_size: %d is negative", c.DiskCacheSize)
	}
	if c.CacheSize > 0 && c.StreamThreshold > c.CacheSize {
		return fmt.Errorf("stream_threshold %s is larger than cache_size %s", c.StreamThreshold, c.CacheSize)
	}
	for _, d := range []struct {
		key string
		v   duration.Duration
	}{{"fetch_timeout", c.FetchTimeout}, {"request_timeout", c.RequestTimeout}, {"shutdown_timeout", c.ShutdownTimeout}, {"poll.stale_after", c.Poll.StaleAfter}} {
		if d.v < 0 {
			return fmt.Errorf("%s: %s is negative", d.key, d.v.D())
		}
	}
	if c.ConnPoller != "" && c.ConnPoller != "edged" && c.ConnPoller != "go" {
		return fmt.Errorf("conn_poller: %q is neither \"edged\" nor \"go\"", c.ConnPoller)
	}
	if w := c.Poll.Wait.D(); w != 0 && (w < time.Second || w > 60*time.Second) {
		return fmt.Errorf("poll.wait: %s is outside 1s..60s", w)
	}
	if c.Poll.BackoffMin < 0 || c.Poll.BackoffMax < c.Poll.BackoffMin {
		return fmt.Errorf("poll: backoff_min %s and backoff_max %s are not an increasing range", c.Poll.BackoffMin, c.Poll.BackoffMax)
	}
	return c.validateTLS()
}

// diskCacheDir is where objects over the stream threshold are kept ("": a temporary
// directory).
func (c Config) diskCacheDir() string {
	switch {
	case c.DiskCache != "":
		return c.DiskCache
	case c.StateDir != "":
		return filepath.Join(c.StateDir, "objects")
	}
	return ""
}

// validateTLS checks the HTTPS keys: certificates are kept under state_dir, the CA is
// an https URL, the contact an e-mail address.
func (c Config) validateTLS() error {
	if c.TLSListen == "" {
		return nil
	}
	if c.StateDir == "" {
		return errors.New("tls_listen: certificates are kept under state_dir, which is empty")
	}
	if c.ACMECA != "" {
		u, err := url.Parse(c.ACMECA)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("acme_ca: %q is not an https URL of an ACME directory", c.ACMECA)
		}
	}
	if c.ACMEStorage != "" && c.ACMEStorage != StorageLocal && c.ACMEStorage != StorageControld {
		return fmt.Errorf("acme_storage: %q is neither %q nor %q", c.ACMEStorage, StorageLocal, StorageControld)
	}
	if ttl := c.ACMELockTTL.D(); ttl != 0 && (ttl < 3*time.Second || ttl > time.Hour) {
		return fmt.Errorf("acme_lock_ttl: %s is outside 3s..1h", ttl)
	}
	if ri := c.ACMERenewInterval.D(); ri < 0 {
		return fmt.Errorf("acme_renew_interval: %s is negative", ri)
	}
	if c.ACMEChallenge != "" && c.ACMEChallenge != ChallengeHTTP01 && c.ACMEChallenge != ChallengeTLSALPN01 {
		return fmt.Errorf("acme_challenge: %q is neither %q nor %q", c.ACMEChallenge, ChallengeHTTP01, ChallengeTLSALPN01)
	}
	if c.ACMEEmail != "" {
		if a, err := mail.ParseAddress(c.ACMEEmail); err != nil || a.Address != c.ACMEEmail {
			return fmt.Errorf("acme_email: %q is not a bare e-mail address", c.ACMEEmail)
		}
	}
	return nil
}

// token returns controld's token: Token, else the content of TokenFile, else the
// ARMOR_EDGE_TOKEN environment variable.
func (c Config) token() (string, error) {
	if c.Token != "" {
		return c.Token, nil
	}
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", fmt.Errorf("read controld token: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("read controld token: %s is empty", c.TokenFile)
	}
	if t := strings.TrimSpace(os.Getenv(TokenEnv)); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("no controld token: set %s or token_file", TokenEnv)
}

// ByteSize is a size in bytes, written in TOML as an integer or a string such as
// "512MiB", "8 MiB", "1GB" or "4096".
type ByteSize int64

// Binary and decimal size units accepted by ByteSize.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// UnmarshalText parses a size such as "512MiB".
func (s *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseByteSize parses a size such as "512MiB", "1.5GiB", "64k" or "4096".
func ParseByteSize(text string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(text))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)", text)
	}
	return ByteSize(n * float64(mult)), nil
}

// String formats the size in the largest binary unit that divides it.
func (s ByteSize) String() string {
	switch {
	case s != 0 && s%GiB == 0:
		return strconv.FormatInt(int64(s/GiB), 10) + "GiB"
	case s != 0 && s%MiB == 0:
		return strconv.FormatInt(int64(s/MiB), 10) + "MiB"
	case s != 0 && s%KiB == 0:
		return strconv.FormatInt(int64(s/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}
