package pool

import "strings"

// Prefix is Debian's pool prefix for a source package: "libf" for "libfoo",
// "h" for "hello", and "l" for a source named just "lib". An empty name has an
// empty prefix.
func Prefix(source string) string {
	if len(source) > 3 && strings.HasPrefix(source, "lib") {
		return source[:4]
	}
	if source == "" {
		return ""
	}
	return source[:1]
}

// Filename is the canonical pool file name of a binary package, as dak and reprepro
// name it: name_version_arch.deb with the epoch dropped.
func Filename(name, version, arch string) string {
	if i := strings.IndexByte(version, ':'); i >= 0 {
		version = version[i+1:]
	}
	return name + "_" + version + "_" + arch + ".deb"
}

// Path returns pool/<component>/<prefix>/<source>/<filename>. The names are
// used as given: callers pass validated package names, which hold no slashes.
func Path(component, source, filename string) string {
	return "pool/" + component + "/" + Prefix(source) + "/" + source + "/" + filename
}
