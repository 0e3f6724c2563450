package gen

// faultAt is nil except in tests (export_test.go), which set it to make one step of a
// build fail after that step did its work: each step's failure must leave the tree as it
// was. The steps are named where fault is called.
var faultAt func(step string) error

// fault returns the error a test injects at step, or nil.
func fault(step string) error {
	if faultAt == nil {
		return nil
	}
	return faultAt(step)
}
