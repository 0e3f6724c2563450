package gen

// SetFault makes the build step for which f returns an error fail (see fault.go) until
// the test ends.
func SetFault(t interface{ Cleanup(func()) }, f func(step string) error) {
	faultAt = f
	t.Cleanup(func() { faultAt = nil })
}
