package controld

import "testing"

func TestEtagMatches(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{`"7"`, true}, {`W/"7"`, true}, {`"6", "7"`, true}, {`*`, true},
		{`"6"`, false}, {``, false}, {`7`, false},
	}
	for _, tc := range tests {
		if got := etagMatches(tc.header, `"7"`); got != tc.want {
			t.Errorf("etagMatches(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}
