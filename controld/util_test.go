package controld_test

import (
	"encoding/json"
	"os"
)

func readAll(path string) ([]byte, error) { return os.ReadFile(path) }

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
