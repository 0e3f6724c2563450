package store

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadSized: whatever size says, the whole content comes back; a right size reads it
// in one allocation, where io.ReadAll takes several and a copy.
func TestReadSized(t *testing.T) {
	content := strings.Repeat("armor ", 100_000)
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"unknown", -1},
		{"right", int64(len(content))},
		{"too small", 10},
		{"too large", int64(len(content)) + 1000},
		{"zero", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadSized(iotest.HalfReader(strings.NewReader(content)), tc.size)
			if err != nil || string(got) != content {
				t.Fatalf("read %d bytes (%v), want the %d of the content", len(got), err, len(content))
			}
		})
	}
	if _, err := ReadSized(iotest.ErrReader(bytes.ErrTooLarge), 10); err != bytes.ErrTooLarge {
		t.Errorf("a read error came back as %v", err)
	}
	r := strings.NewReader(content)
	allocs := testing.AllocsPerRun(10, func() {
		r.Reset(content)
		if _, err := ReadSized(r, int64(len(content))); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a read of known size took %.0f allocations, want 1", allocs)
	}
}
