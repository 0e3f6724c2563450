// Package duration is the one duration syntax of armor's configuration files, flags and
// API: a Go duration ("48h", "90m", "1h30m", "500ms") or a whole number of days ("7d"),
// which Go's own syntax lacks and retention windows want.
package duration

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes as text in the one syntax. The zero
// value is zero: a field left out of a file keeps it, and its owner applies a default.
type Duration time.Duration

// Parse reads "7d" (whole days) or any Go duration. It accepts zero and negative values;
// the owner of a field says which it allows.
func Parse(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err == nil {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return 0, fmt.Errorf("%q is not a duration such as \"7d\", \"48h\" or \"90m\"", s)
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String writes the value as time.Duration does ("48h0m0s"), which Parse reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText reads the value in the one syntax (TOML, JSON and kong flags all use it).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the value as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
