// Package awskms signs with an asymmetric key held in AWS KMS, named as cosign names it:
// awskms://[ENDPOINT]/KEY-ID-OR-ALIAS, where the key is a key ID, an alias (alias/NAME)
// or an ARN of either. The secret half never leaves KMS: armor sends it the digest of a
// Release (kms:Sign with MessageType DIGEST) and wraps the PKCS#1 v1.5 signature it
// returns in OpenPGP packets.
//
// Everything else is the AWS SDK's own configuration: the region (AWS_REGION, the
// profile, or the region of an ARN), the credentials chain (environment, profile, SSO, web
// identity, container and instance roles), the endpoint (AWS_ENDPOINT_URL_KMS, or ENDPOINT
// in the URI, reached over HTTPS), and the retries (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE):
// throttling and network errors are retried with exponential backoff by the SDK's
// standard retryer. KMS keys of spec RSA_2048, RSA_3072 and RSA_4096 with usage
// SIGN_VERIFY can sign; the principal needs kms:GetPublicKey and kms:Sign.
package awskms

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/armor-apt/armor/debian/sign"
)

// Signer is a KMS key that signs.
type Signer struct {
	uri    string
	keyID  string
	client *kms.Client
	pub    *rsa.PublicKey
}

var _ sign.Signer = (*Signer)(nil)

// keyRE is cosign's form of the part after the endpoint.
var keyRE = regexp.MustCompile(`^(arn:aws[\w-]*:kms:([\w-]+):\d{12}:(key/[\w-]+|alias/[\w/-]+)|alias/[\w/-]+|[\w-]+)$`)

// parse splits an awskms URI into its endpoint, key and the region an ARN names.
func parse(uri string) (endpoint, key, region string, err error) {
	rest, ok := strings.CutPrefix(uri, "awskms://")
	if !ok {
		return "", "", "", fmt.Errorf("%q is not an awskms:// URI", uri)
	}
	endpoint, key, ok = strings.Cut(rest, "/")
	if !ok || key == "" {
		return "", "", "", fmt.Errorf("key URI %q names no key: write awskms:///KEY-ID, awskms:///alias/NAME or awskms:///arn:aws:kms:REGION:ACCOUNT:key/ID", uri)
	}
	m := keyRE.FindStringSubmatch(key)
	if m == nil {
		return "", "", "", fmt.Errorf("key URI %q: %q is not a KMS key ID, alias/NAME or ARN", uri, key)
	}
	if endpoint != "" {
		if _, err := url.Parse("https://" + endpoint); err != nil || strings.ContainsAny(endpoint, "/?#@") {
			return "", "", "", fmt.Errorf("key URI %q: endpoint %q is not a host[:port]", uri, endpoint)
		}
	}
	return endpoint, key, m[2], nil
}

// Open loads the SDK's configuration, fetches the key's public half and checks that it
// can sign. Errors wrap sign.ErrSignerUnavailable or sign.ErrSignerDenied as Sign's do.
func Open(ctx context.Context, uri string) (*Signer, error) {
	endpoint, key, region, err := parse(uri)
	if err != nil {
		return nil, err
	}
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("key %s: load the AWS configuration: %w", uri, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("key %s: no AWS region: set $AWS_REGION, a region in the AWS profile, or name the key by its ARN", uri)
	}
	client := kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String("https://" + endpoint)
		}
	})
	s := &Signer{uri: uri, keyID: key, client: client}
	out, err := client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(key)})
	if err != nil {
		return nil, s.wrap("get its public key", err)
	}
	if out.KeyUsage != types.KeyUsageTypeSignVerify {
		return nil, fmt.Errorf("key %s has usage %s: create a SIGN_VERIFY key (RSA_3072 or RSA_4096): %w", uri, out.KeyUsage, sign.ErrUnsupportedKey)
	}
	pub, err := x509.ParsePKIXPublicKey(out.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("key %s: parse its public key: %w", uri, err)
	}
	rsaPub, ok := pub.(*rsa.PublicKey)
	if !ok || !slices.Contains(out.SigningAlgorithms, types.SigningAlgorithmSpecRsassaPkcs1V15Sha512) {
		return nil, fmt.Errorf("key %s is a %s key: armor signs with RSA keys in KMS (RSA_2048, RSA_3072 or RSA_4096; apt in Debian 12 takes no other KMS key type): %w",
			uri, out.KeySpec, sign.ErrUnsupportedKey)
	}
	s.pub = rsaPub
	return s, nil
}

// Public returns the key's public half, fetched by Open.
func (s *Signer) Public() crypto.PublicKey { return s.pub }

var algorithms = map[crypto.Hash]types.SigningAlgorithmSpec{
	crypto.SHA256: types.SigningAlgorithmSpecRsassaPkcs1V15Sha256,
	crypto.SHA384: types.SigningAlgorithmSpecRsassaPkcs1V15Sha384,
	crypto.SHA512: types.SigningAlgorithmSpecRsassaPkcs1V15Sha512,
}

// Sign asks KMS for the PKCS#1 v1.5 signature of digest.
func (s *Signer) Sign(ctx context.Context, digest []byte, h crypto.Hash) ([]byte, error) {
	alg, ok := algorithms[h]
	if !ok {
		return nil, fmt.Errorf("key %s: unsupported hash %v", s.uri, h)
	}
	out, err := s.client.Sign(ctx, &kms.SignInput{
		KeyId: aws.String(s.keyID), Message: digest, MessageType: types.MessageTypeDigest, SigningAlgorithm: alg,
	})
	if err != nil {
		return nil, s.wrap("sign", err)
	}
	return out.Signature, nil
}

// denied are the KMS error codes that retrying does not change.
var denied = []string{
	"AccessDeniedException", "DisabledException", "KMSInvalidStateException", "NotFoundException",
	"InvalidKeyUsageException", "UnrecognizedClientException", "InvalidClientTokenId",
	"IncompleteSignature", "InvalidSignatureException", "SignatureDoesNotMatch", "ExpiredTokenException",
}

// wrap classifies a KMS error for sign.Signer's contract.
func (s *Signer) wrap(doing string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("key %s: %s: %w", s.uri, doing, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) && slices.Contains(denied, api.ErrorCode()) {
		return fmt.Errorf("key %s: %s: %w: %w", s.uri, doing, sign.ErrSignerDenied, err)
	}
	if errors.As(err, &api) && !strings.Contains(api.ErrorCode(), "Throttl") && !strings.Contains(api.ErrorCode(), "Internal") &&
		!strings.Contains(api.ErrorCode(), "Timeout") && !strings.Contains(api.ErrorCode(), "Unavailable") {
		return fmt.Errorf("key %s: %s: %w", s.uri, doing, err)
	}
	return fmt.Errorf("key %s: %s (after the AWS SDK's retries; $AWS_MAX_ATTEMPTS sets how many): %w: %w", s.uri, doing, sign.ErrSignerUnavailable, err)
}
