//go:build !unix

package gate

import "os"

// mapFile reads the file at path.
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}
