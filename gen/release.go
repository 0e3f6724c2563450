package gen

import (
	"time"

	"github.com/armor-apt/armor/gen/release"
)

// Redate is release.Redate: the Release file with its Date set to date and its
// Valid-Until moved by as much.
func Redate(data []byte, date time.Time) ([]byte, error) { return release.Redate(data, date) }

// ReleaseDate is release.Date: the Date field of a Release file.
func ReleaseDate(data []byte) (time.Time, error) { return release.Date(data) }
