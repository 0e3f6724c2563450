// Package statetest is the shared test suite for state.Store implementations: each
// implementation's tests call Run with a constructor of fresh, empty stores.
package statetest
