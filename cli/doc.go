// Package cli is the armor command: kong command structs that hold flags, each calling a
// plain function that takes a context, its options and the output writers. Main turns
// errors into messages and exit codes in one place.
package cli
