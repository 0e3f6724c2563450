package awskms

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/kmstest"
)

const release = "Origin: test\nSuite: stable\nDate: Sun, 22 Nov 2026 07:00:00 UTC\n"

// TestSignThroughLocalKMS: a key in a real KMS (local-kms), named by alias and by key ID,
// certifies itself and signs Release files that verify against its certificate; the
// signature is the same through either name.
func TestSignThroughLocalKMS(t *testing.T) {
	k := kmstest.Start(t)
	k.Setenv(t)
	id := k.CreateKey(t, "RSA_3072", "alias/armor-test")
	ctx := context.Background()
	var sigs [][]byte
	var certs []byte
	for _, uri := range []string{"awskms:///alias/armor-test", "awskms:///" + id} {
		s, err := Open(ctx, uri)
		if err != nil {
			t.Fatal(err)
		}
		var key *sign.Key
		if certs == nil {
			key, err = sign.Certify(ctx, s, uri, "Test <t@example.org>", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
			var b bytes.Buffer
			if err == nil {
				err = key.WritePublicKeyring(&b)
			}
			certs = b.Bytes()
		} else {
			key, err = sign.NewKey(s, uri, certs)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, det, err := key.SignRelease(ctx, []byte(release), crypto.SHA512, time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		if fp, err := sign.VerifyDetached([]byte(release), det, certs); err != nil || fp != key.Fingerprint() {
			t.Fatalf("verify: %s, %v", fp, err)
		}
		sigs = append(sigs, det)
	}
	if !bytes.Equal(sigs[0], sigs[1]) {
		t.Error("the same key through its alias and its ID signed differently")
	}
}

// TestThrottled: throttling is retried with backoff by the SDK's retryer, as many times as
// its settings say ($AWS_MAX_ATTEMPTS); beyond that the error says the key is unavailable.
func TestThrottled(t *testing.T) {
	k := kmstest.Start(t)
	k.Setenv(t)
	k.CreateKey(t, "RSA_3072", "alias/armor-test")
	th := kmstest.Throttle(t, k.URL, 0)
	t.Setenv("AWS_ENDPOINT_URL_KMS", th.URL)
	ctx := context.Background()
	digest := crypto.SHA256.New().Sum(nil)
	for _, tc := range []struct {
		name        string
		throttle    int32
		maxAttempts string
		signs       int32
		ok          bool
	}{
		{"twice then served", 2, "", 3, true},
		{"always, default attempts", 100, "", 3, false},
		{"always, AWS_MAX_ATTEMPTS=5", 100, "5", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.maxAttempts != "" {
				t.Setenv("AWS_MAX_ATTEMPTS", tc.maxAttempts)
			}
			th.N.Store(tc.throttle)
			th.Signs.Store(0)
			s, err := Open(ctx, "awskms:///alias/armor-test")
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Sign(ctx, digest, crypto.SHA256)
			if got := th.Signs.Load(); got != tc.signs {
				t.Errorf("%d Sign requests, want %d", got, tc.signs)
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("sign after throttling: %v", err)
			case !tc.ok && !errors.Is(err, sign.ErrSignerUnavailable):
				t.Fatalf("got %v, want ErrSignerUnavailable", err)
			case !tc.ok && !strings.Contains(err.Error(), "ThrottlingException"):
				t.Errorf("error %q does not say it was throttled", err)
			}
		})
	}
}

// TestUnavailableAndDenied: KMS unreachable gives ErrSignerUnavailable; a disabled key
// gives ErrSignerDenied; each names the key URI.
func TestUnavailableAndDenied(t *testing.T) {
	k := kmstest.Start(t)
	k.Setenv(t)
	id := k.CreateKey(t, "RSA_3072", "")
	ctx := context.Background()
	s, err := Open(ctx, "awskms:///"+id)
	if err != nil {
		t.Fatal(err)
	}
	c := kms.New(kms.Options{Region: "eu-west-1", BaseEndpoint: aws.String(k.URL),
		Credentials: credentials.NewStaticCredentialsProvider("armortest", "armortest", "")})
	if _, err := c.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Sign(ctx, crypto.SHA256.New().Sum(nil), crypto.SHA256)
	if !errors.Is(err, sign.ErrSignerDenied) || !strings.Contains(err.Error(), id) {
		t.Errorf("disabled key: got %v, want ErrSignerDenied naming the key", err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv("AWS_ENDPOINT_URL_KMS", closed)
	t.Setenv("AWS_MAX_ATTEMPTS", "2")
	_, err = Open(ctx, "awskms:///alias/nothing-there")
	if !errors.Is(err, sign.ErrSignerUnavailable) || !strings.Contains(err.Error(), "alias/nothing-there") {
		t.Errorf("KMS unreachable: got %v, want ErrSignerUnavailable naming the key", err)
	}
}

// TestRSAOnly: an ECC key is refused with a message saying which keys can sign.
func TestRSAOnly(t *testing.T) {
	k := kmstest.Start(t)
	k.Setenv(t)
	id := k.CreateKey(t, "ECC_NIST_P256", "")
	if _, err := Open(context.Background(), "awskms:///"+id); !errors.Is(err, sign.ErrUnsupportedKey) || !strings.Contains(err.Error(), "RSA") {
		t.Errorf("ECC key: got %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ uri, endpoint, key, region, err string }{
		{uri: "awskms:///1234abcd-12ab-34cd-56ef-1234567890ab", key: "1234abcd-12ab-34cd-56ef-1234567890ab"},
		{uri: "awskms:///alias/release/signing", key: "alias/release/signing"},
		{uri: "awskms://kms.example.org:4443/alias/x", endpoint: "kms.example.org:4443", key: "alias/x"},
		{uri: "awskms:///arn:aws:kms:us-east-2:111122223333:key/1234abcd-12ab", key: "arn:aws:kms:us-east-2:111122223333:key/1234abcd-12ab", region: "us-east-2"},
		{uri: "awskms:///arn:aws:kms:eu-west-1:111122223333:alias/x", key: "arn:aws:kms:eu-west-1:111122223333:alias/x", region: "eu-west-1"},
		{uri: "awskms://", err: "names no key"},
		{uri: "awskms:///", err: "names no key"},
		{uri: "awskms:///key with space", err: "is not a KMS key"},
		{uri: "awskms://user@host/alias/x", err: "endpoint"},
	} {
		e, k, r, err := parse(tc.uri)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", tc.uri, err, tc.err)
			}
			continue
		}
		if err != nil || e != tc.endpoint || k != tc.key || r != tc.region {
			t.Errorf("%s: got %q %q %q %v", tc.uri, e, k, r, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("awskms:///alias/x")
	f.Add("awskms://kms.example.org:4443/arn:aws:kms:eu-west-1:111122223333:key/1234")
	f.Fuzz(func(t *testing.T, s string) {
		endpoint, key, _, err := parse(s)
		if err == nil && (key == "" || strings.ContainsAny(endpoint, "/?#@")) {
			t.Fatalf("%q parsed to endpoint %q key %q", s, endpoint, key)
		}
	})
}
