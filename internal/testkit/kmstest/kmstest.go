// Package kmstest starts a real AWS KMS emulator, nsmithuk/local-kms, for tests: a
// process on a loopback port with its data in a temporary directory, and RSA signing
// keys made in it through the AWS SDK. .ci/install-tools installs local-kms.
package kmstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// KMS is a running local-kms.
type KMS struct {
	URL string // http://127.0.0.1:PORT
}

// Binary returns the path of local-kms, or fails the test saying how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("local-kms"); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(string(trim(gopath)), "bin", "local-kms")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatalf("local-kms is not installed: run .ci/install-tools (go install github.com/nsmithuk/local-kms@%s)", Version)
	return ""
}

// Version is the local-kms version .ci/install-tools installs.
const Version = "v0.0.0-20260228092603-2a5e92d09ab6"

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Start starts local-kms for the test and stops it when the test ends.
func Start(t testing.TB) *KMS {
	t.Helper()
	bin := Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "local-kms.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "KMS_DATA_PATH="+filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start local-kms: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("local-kms log:\n%s", data)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			data, _ := os.ReadFile(log.Name())
			t.Fatalf("local-kms exited:\n%s", data)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("local-kms did not listen on %s within 20s", addr)
		}
	}
	return &KMS{URL: "http://" + addr}
}

// Env is the environment in which the AWS SDK reaches this KMS with test credentials,
// and nothing of the machine's own AWS configuration.
func (k *KMS) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_KMS=" + k.URL, "AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=armortest", "AWS_SECRET_ACCESS_KEY=armortest",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Setenv sets Env in the test's own environment.
func (k *KMS) Setenv(t testing.TB) {
	t.Helper()
	for _, kv := range k.Env() {
		for i := range kv {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
}

// CreateKey makes a signing key of spec (such as "RSA_3072") with an alias, and returns
// its key ID.
func (k *KMS) CreateKey(t testing.TB, spec, alias string) string {
	t.Helper()
	ctx := context.Background()
	c := kms.New(kms.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(k.URL),
		Credentials: credentials.NewStaticCredentialsProvider("armortest", "armortest", ""),
	})
	out, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpec(spec), KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatalf("local-kms CreateKey %s: %v", spec, err)
	}
	if alias != "" {
		if _, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: out.KeyMetadata.KeyId}); err != nil {
			t.Fatalf("local-kms CreateAlias %s: %v", alias, err)
		}
	}
	return *out.KeyMetadata.KeyId
}

// Throttler is an HTTP server in front of a KMS that answers the first N Sign requests
// with ThrottlingException, as KMS does beyond its request quota, and passes everything
// else through. Signs counts the Sign requests it saw.
type Throttler struct {
	URL      string
	N, Signs atomic.Int32
}

// Throttle starts a Throttler in front of target (a KMS URL) for the test.
func Throttle(t testing.TB, target string, n int32) *Throttler {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	th := &Throttler{}
	th.N.Store(n)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "TrentService.Sign" && th.Signs.Add(1) <= th.N.Load() {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	th.URL = srv.URL
	return th
}
