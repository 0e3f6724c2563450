// Package tomlfile decodes armor's TOML documents strictly, in one way for all of them
// (armor.toml, controld.toml, edged.toml and the manifest's fallback path): an unknown key,
// a wrong type or malformed TOML is an error that names the document and the line.
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pelletier/go-toml/v2"
)

// Decode decodes data into v, refusing unknown keys. name labels errors (a file path).
func Decode(data []byte, name string, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		return fmt.Errorf("%s: unknown key (check its spelling and section):\n%s", name, strict.String())
	case errors.As(err, &de):
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %s", name, row, col, de.Error())
	default:
		return fmt.Errorf("%s: %w", name, err)
	}
}
