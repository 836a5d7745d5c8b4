package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Access tokens.
//
// E2B's SDK authenticates its in-sandbox calls with the envdAccessToken a
// create or connect answered (X-Access-Token), and the code interpreter's
// context calls with the trafficAccessToken (E2B-Traffic-Access-Token);
// neither carries the API key. sandhold answers with tokens derived from
// a server secret, never a key:
//
//	token = "e2bt_" + keyID + "." + base64url(HMAC-SHA256(secret, purpose ‖ keyID ‖ sandboxID))
//
// A token is good for one sandbox and acts as the key that obtained it:
// every call it authenticates is a dispatched call of that key (role,
// policy, limits, audit), re-read on each request, so revoking the key ends
// its tokens, and a deleted sandbox leaves nothing a token can reach. It
// grants nothing the key lacks — a create or a connect by that key, which
// was itself a dispatched call, is how one is obtained — and no token is
// stored: a node verifies it with the shared secret (the store's setting
// e2b.token_secret, made on first use: in a cluster every node reads the
// same).
//
// Signed URLs (uploadUrl, downloadUrl): the SDK signs with the envd token,
// "v1_" + base64(SHA-256(path:operation:user:token[:expiration])). sandhold
// honours a signed URL only with an expiration (signature_expiration) at
// most maxURLLifetime ahead, for the one path, operation and user it names,
// verified against the token of the sandbox owner's key; the call it makes
// is the owner's file.upload or file.download, dispatched as any other.

// Token purposes.
const (
	purposeEnvd    = "sandhold e2b envd access v1"
	purposeTraffic = "sandhold e2b traffic access v1"
)

// tokenPrefix starts every token (redaction and logs can tell one).
const tokenPrefix = "e2bt_"

// secretSetting is the store setting that holds the HMAC secret.
const secretSetting = "e2b.token_secret"

// maxURLLifetime is the furthest ahead a signed URL's expiration may lie:
// a URL given to a browser is a bearer credential for one file, so it must
// end soon (E2B's own docs sign for 10,000 s).
const maxURLLifetime = 6 * time.Hour

// errBadToken is every token that does not verify: the caller learns only
// that it was refused.
var errBadToken = errors.New("access token not valid for this sandbox")

// tokens mints and verifies access tokens.
type tokens struct {
	st store.Store

	// mu guards secret, read from the store once and again when a token
	// fails to verify (another node may have made the secret first).
	mu     sync.Mutex
	secret []byte
}

// load returns the secret, making and storing one on first use; fresh
// reads the store again.
func (t *tokens) load(ctx context.Context, fresh bool) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.secret != nil && !fresh {
		return t.secret, nil
	}
	b, err := t.st.GetSetting(ctx, secretSetting)
	if err == nil && len(b) >= 32 {
		t.secret = b
		return b, nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read e2b token secret: %w", err)
	}
	s := make([]byte, 32)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("random: %w", err)
	}
	if err := t.st.PutSetting(ctx, secretSetting, s); err != nil {
		return nil, fmt.Errorf("store e2b token secret: %w", err)
	}
	// Read back: of two nodes making it at once, the last write wins, and
	// a node that kept its own would refuse the other's tokens until it
	// reads again (verify does, once, on a mismatch).
	if b, err = t.st.GetSetting(ctx, secretSetting); err != nil || len(b) < 32 {
		return nil, fmt.Errorf("read back e2b token secret: %w", err)
	}
	t.secret = b
	return b, nil
}

func tokenMAC(secret []byte, purpose, keyID, sandboxID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(keyID))
	m.Write([]byte{0})
	m.Write([]byte(sandboxID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// mint returns keyID's token of purpose for sandboxID.
func (t *tokens) mint(ctx context.Context, purpose, keyID, sandboxID string) (string, error) {
	secret, err := t.load(ctx, false)
	if err != nil {
		return "", err
	}
	return tokenPrefix + keyID + "." + tokenMAC(secret, purpose, keyID, sandboxID), nil
}

// verify returns the key id of a token of purpose for sandboxID.
func (t *tokens) verify(ctx context.Context, purpose, token, sandboxID string) (string, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 || sandboxID == "" {
		return "", errBadToken
	}
	keyID, mac := rest[:i], rest[i+1:]
	for _, fresh := range []bool{false, true} {
		secret, err := t.load(ctx, fresh)
		if err != nil {
			return "", err
		}
		if subtle.ConstantTimeCompare([]byte(mac), []byte(tokenMAC(secret, purpose, keyID, sandboxID))) == 1 {
			return keyID, nil
		}
	}
	return "", errBadToken
}

// urlSignature is the SDK's signature of a file URL (sandbox/signature.ts
// in the e2b package): operation is "read" or "write", expiration 0 none.
func urlSignature(path, operation, user, token string, expiration int64) string {
	raw := path + ":" + operation + ":" + user + ":" + token
	if expiration != 0 {
		raw += ":" + strconv.FormatInt(expiration, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// checkURLExpiry applies the lifetime rule to a signed URL's expiration
// (Unix seconds, as sent).
func checkURLExpiry(raw string, now time.Time) error {
	if raw == "" {
		return errors.New("sandhold honours only signed URLs that expire: sign with useSignatureExpiration (at most 6 hours)")
	}
	exp, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return errors.New("signature_expiration is not a Unix time")
	}
	switch at := time.Unix(exp, 0); {
	case !now.Before(at):
		return errors.New("the signed URL has expired")
	case at.Sub(now) > maxURLLifetime:
		return errors.New("the signed URL expires more than 6 hours from now; sign it for less")
	}
	return nil
}
