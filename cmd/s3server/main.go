// Command s3server is a real S3 server for armor's tests: rclone's `serve s3` over the
// local backend, and nothing else of rclone, so it builds much faster than rclone.
//
//	s3server serve s3 --addr 127.0.0.1:0 --auth-key KEY,SECRET DIR
//
// The leading "serve s3" may be left out. Each bucket is a directory under DIR. Once
// listening it logs "Starting s3 server on [http://ADDR/]", with the port the kernel
// chose for :0.
//
// rclone serve s3 (v1.76.0) loses an upload when two PUTs create the same new directory
// at once: vfs.Dir.Mkdir checks and then adds the directory node, so the second node
// replaces the first, and the upload that created its temporary file under the first
// fails with "Dir.Rename error: file does not exist" (HTTP 500). So s3server listens on
// --addr itself and passes requests on to rclone's server on a unix socket, one mutating
// request at a time; reads pass concurrently. Clients see rclone's answers unchanged.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	_ "github.com/rclone/rclone/backend/local"
	"github.com/rclone/rclone/cmd"
	_ "github.com/rclone/rclone/cmd/serve/s3"
	"github.com/rclone/rclone/lib/atexit"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || !slices.Contains([]string{"serve", "help", "version", "--help", "-h"}, args[0]) {
		args = append([]string{"serve", "s3"}, args...)
	}
	if len(args) > 2 && args[0] == "serve" && args[1] == "s3" {
		if addr, rest, ok := takeAddr(args[2:]); ok {
			sock, err := startFront(addr)
			if err != nil {
				fmt.Fprintf(os.Stderr, "s3server: %v\n", err)
				os.Exit(1)
			}
			args = append([]string{"serve", "s3", "--addr", sock}, rest...)
		}
	}
	os.Args = append(os.Args[:1], args...)
	cmd.Main()
}

// takeAddr removes the --addr flag from args and returns its value.
func takeAddr(args []string) (addr string, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--addr" && i+1 < len(args):
			addr, ok = args[i+1], true
			i++
		case strings.HasPrefix(a, "--addr="):
			addr, ok = strings.TrimPrefix(a, "--addr="), true
		default:
			rest = append(rest, a)
		}
	}
	return addr, rest, ok
}

// startFront listens on addr and serves there, once rclone's server answers on the unix
// socket it returns, a proxy to it that serialises mutating requests.
func startFront(addr string) (string, error) {
	ln, err := net.Listen("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "s3server")
	if err != nil {
		return "", err
	}
	atexit.Register(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s3.sock")
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "s3"})
			r.Out.Host = r.In.Host // signed by the client
		},
		Transport:     &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64},
		FlushInterval: -1,
	}
	var writes sync.Mutex
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
			writes.Lock()
			defer writes.Unlock()
		}
		proxy.ServeHTTP(w, r)
	})
	go func() {
		for {
			c, err := dial(context.Background(), "", "")
			if err == nil {
				c.Close()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Fprintf(os.Stderr, "%s NOTICE: Starting s3 server on [http://%s/]\n",
			time.Now().Format("2006/01/02 15:04:05"), ln.Addr())
		_ = http.Serve(ln, handler)
	}()
	return sock, nil
}
