package controld_test

import (
	"encoding/json"
	"os"
	"strings"
)

func readAll(path string) ([]byte, error) { return os.ReadFile(path) }

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func indexOf(s, sub string) int { return strings.Index(s, sub) }
