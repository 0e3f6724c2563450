package gen

// WithFault makes the build step for which f returns an error fail, after the step did its
// work (see steps): each step's failure must leave the tree as it was. The steps are named
// where steps.done is called, and by tree.Writer.Fault.
func WithFault(o *Options, f func(step string) error) { o.fault = f }
