package cli

type PushCmd struct{}
type ReleasesCmd struct{}
type ActivateCmd struct{}
type RollbackCmd struct{}
type StatusCmd struct{}
type ReposCmd struct{}
type TokensCmd struct{}
type ControldCmd struct{}
type EdgedCmd struct{}
