package pool

import "testing"

func TestPrefix(t *testing.T) {
	tests := []struct {
		name, source, want string
	}{
		{"plain", "hello", "h"},
		{"single letter", "a", "a"},
		{"digit first", "0ad", "0"},
		{"lib source", "libfoo", "libf"},
		{"lib with digit", "lib3ds", "lib3"},
		{"lib alone", "lib", "l"},
		{"lib plus one", "libc", "libc"},
		{"lib not at start", "glibc", "g"},
		{"li is not lib", "lipsum", "l"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Prefix(tt.source); got != tt.want {
				t.Errorf("Prefix(%q) = %q, want %q", tt.source, got, tt.want)
			}
		})
	}
}

func TestPath(t *testing.T) {
	tests := []struct {
		name, component, source, filename, want string
	}{
		{"hello", "main", "hello", "hello_2.10-3_amd64.deb", "pool/main/h/hello/hello_2.10-3_amd64.deb"},
		{"lib source", "main", "libnatpmp", "libnatpmp1_20150609-7.1+b2_amd64.deb", "pool/main/libn/libnatpmp/libnatpmp1_20150609-7.1+b2_amd64.deb"},
		{"other component", "non-free-firmware", "firmware-misc-nonfree", "f_1_all.deb", "pool/non-free-firmware/f/firmware-misc-nonfree/f_1_all.deb"},
		{"source lib", "contrib", "lib", "lib-tools_1_all.deb", "pool/contrib/l/lib/lib-tools_1_all.deb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Path(tt.component, tt.source, tt.filename); got != tt.want {
				t.Errorf("Path(%q, %q, %q) = %q, want %q", tt.component, tt.source, tt.filename, got, tt.want)
			}
		})
	}
}
