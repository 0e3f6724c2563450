package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/client"
)

func TestErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		sentinel    error
		code        string
		active      string
		hasActive   bool
		notSentinel error
	}{
		{"conflict with active", 409, `{"error":{"code":"conflict","message":"lost","active":"abc"}}`, client.ErrConflict, "conflict", "abc", true, client.ErrNotFound},
		{"conflict with none active", 409, `{"error":{"code":"conflict","message":"lost","active":""}}`, client.ErrConflict, "conflict", "", true, nil},
		{"hostname conflict", 409, `{"error":{"code":"conflict","message":"taken"}}`, client.ErrConflict, "conflict", "", false, nil},
		{"not found", 404, `{"error":{"code":"not_found","message":"no"}}`, client.ErrNotFound, "not_found", "", false, client.ErrConflict},
		{"unauthorized", 401, `{"error":{"code":"unauthorized","message":"no"}}`, client.ErrUnauthorized, "unauthorized", "", false, client.ErrForbidden},
		{"forbidden", 403, `{"error":{"code":"forbidden","message":"no"}}`, client.ErrForbidden, "forbidden", "", false, client.ErrUnauthorized},
		{"invalid release", 422, `{"error":{"code":"invalid_release","message":"bad"}}`, client.ErrInvalid, "invalid_release", "", false, nil},
		{"not JSON", 502, "Bad Gateway from a proxy", nil, "http", "", false, client.ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := client.New(srv.URL+"/", "tok", nil).Activate(context.Background(), "demo", "id", "")
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an *APIError", err)
			}
			if apiErr.Status != tc.status || apiErr.Code != tc.code || apiErr.Active != tc.active || apiErr.HasActive != tc.hasActive {
				t.Errorf("APIError = %+v", apiErr)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(err, %v) = false", tc.sentinel)
			}
			if tc.notSentinel != nil && errors.Is(err, tc.notSentinel) {
				t.Errorf("errors.Is(err, %v) = true", tc.notSentinel)
			}
		})
	}
}

func TestRoutesRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/routes" {
			t.Errorf("path = %s", r.URL.Path)
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"unknown token"}}`)
			return
		}
		if inm := r.Header.Get("If-None-Match"); inm == `"7"` {
			if r.URL.Query().Get("wait") != "30" {
				t.Errorf("wait = %q, want 30", r.URL.Query().Get("wait"))
			}
			w.WriteHeader(http.StatusNotModified)
			return
		} else if inm != "" {
			t.Errorf("If-None-Match = %q", inm)
		}
		io.WriteString(w, `{"version":8,"generated_at":"2026-11-22T08:00:00Z","sites":[{"repository":"demo","hostnames":["a.test"],"active":null,"retained":[]}]}`)
	}))
	defer srv.Close()
	c := client.New(srv.URL, "tok", nil)
	if _, err := c.Routes(context.Background(), 7, 30*time.Second); !errors.Is(err, client.ErrNotModified) {
		t.Errorf("unchanged routes: %v, want ErrNotModified", err)
	}
	r, err := c.Routes(context.Background(), 0, 0)
	if err != nil || r.Version != 8 || r.Sites[0].Repository != "demo" || r.Sites[0].Active != nil {
		t.Errorf("routes = %+v, %v", r, err)
	}
	var apiErr *client.APIError
	if _, err := client.New(srv.URL, "wrong", nil).Routes(context.Background(), 0, 0); !errors.As(err, &apiErr) || !errors.Is(err, client.ErrUnauthorized) || apiErr.Code != "unauthorized" {
		t.Errorf("refused token: %v; want an *APIError matching ErrUnauthorized", err)
	}
}
