// Package controldtest starts a real controld in process for tests: its HTTP API on
// 127.0.0.1 through httptest, its state in a bbolt file in a temporary directory, over
// the object store the test gives, with one token that has every right.
package controldtest

import (
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/store"
)

// Server is a running controld.
type Server struct {
	URL    string
	Secret string         // a token with every action on every repository
	Client *client.Client // a client holding Secret
	stop   func()
}

// Stop stops the server before the test ends: its clients then find nothing listening.
func (s *Server) Stop() { s.stop() }

// Start runs a controld over s until the test ends.
func Start(t testing.TB, s store.Store) *Server {
	t.Helper()
	dir := t.TempDir()
	secret, err := controld.CreateToken(dir, "root", []string{api.AllRepositories}, api.Actions)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, controld.DBFile), &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controld.NewServer(controld.Config{}, s, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			hs.CloseClientConnections()
			hs.Close()
			st.Close()
		})
	}
	t.Cleanup(stop)
	return &Server{URL: hs.URL, Secret: secret, Client: client.New(hs.URL, secret, hs.Client()), stop: stop}
}
