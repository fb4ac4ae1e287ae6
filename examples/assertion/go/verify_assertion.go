// Verifying the sidecar's caller assertion in a Go upstream, with go-jose
// (gopkg.in/square/go-jose.v2; Debian: golang-gopkg-square-go-jose.v2-dev; go-jose v3 and v4 have
// the same API, v4's ParseSigned takes the allowed algorithms).
//
// Paste Verifier into your server and call Verify on every request before doing anything:
//
//	v := &Verifier{JWKSURL: "https://mcp.example.com/.well-known/jwks.json", // the sidecar's PUBLIC_URL + this path
//		Issuer: "https://mcp.example.com", Audience: "http://mcp-server:3000"}
//	caller, err := v.Verify(r.Header.Get("X-MCP-Auth-Assertion")) // err: answer 401
//
// As a command: `go run verify_assertion.go JWKS_URL ISSUER AUDIENCE < assertion` prints the claims
// (exit 0) or why the assertion is refused (exit 1).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	jose "gopkg.in/square/go-jose.v2"
	"gopkg.in/square/go-jose.v2/jwt"
)

// Caller is who the sidecar authenticated.
type Caller struct {
	jwt.Claims
	Kind     string   `json:"mcp_kind"`
	ClientID string   `json:"client_id,omitempty"`
	Scope    string   `json:"scope,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Email    string   `json:"email,omitempty"`
}

// Verifier checks assertions against the sidecar's JWKS, refetching it (at most every 30 s) when an
// assertion names a kid it does not know: a new replica, or a rotation.
type Verifier struct {
	JWKSURL, Issuer, Audience string

	mu      sync.Mutex
	keys    jose.JSONWebKeySet
	fetched time.Time
}

func (v *Verifier) key(kid string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if found := v.keys.Key(kid); len(found) == 1 {
		return &found[0], nil
	}
	if time.Since(v.fetched) < 30*time.Second {
		return nil, errors.New("unknown kid")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get(v.JWKSURL)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS answered %d", res.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&set); err != nil {
		return nil, err
	}
	v.keys, v.fetched = set, time.Now()
	if found := v.keys.Key(kid); len(found) == 1 {
		return &found[0], nil
	}
	return nil, errors.New("unknown kid")
}

// Verify returns the caller an assertion names, or why it is refused.
func (v *Verifier) Verify(assertion string) (*Caller, error) {
	if assertion == "" {
		return nil, errors.New("no X-MCP-Auth-Assertion header")
	}
	token, err := jwt.ParseSigned(assertion)
	if err != nil {
		return nil, err
	}
	// Only ES256: "none", HMAC (a public key used as a secret) and every other algorithm are refused.
	if len(token.Headers) != 1 || token.Headers[0].Algorithm != string(jose.ES256) {
		return nil, errors.New("algorithm is not ES256")
	}
	key, err := v.key(token.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var caller Caller
	if err := token.Claims(key, &caller); err != nil {
		return nil, err
	}
	// Validate skips a missing exp: require it.
	if caller.Expiry == nil || caller.IssuedAt == nil || caller.Subject == "" || caller.Kind == "" {
		return nil, errors.New("exp, iat, sub or mcp_kind missing")
	}
	// 30 s of clock skew between the sidecar's host and this one, for exp and iat.
	if err := caller.ValidateWithLeeway(jwt.Expected{Issuer: v.Issuer, Audience: jwt.Audience{v.Audience}, Time: time.Now()}, 30*time.Second); err != nil {
		return nil, err
	}
	return &caller, nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: verify_assertion JWKS_URL ISSUER AUDIENCE < assertion")
		os.Exit(2)
	}
	input, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<10))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	v := &Verifier{JWKSURL: os.Args[1], Issuer: os.Args[2], Audience: os.Args[3]}
	caller, err := v.Verify(strings.TrimSpace(string(input)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "refused: %v\n", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(caller)
	fmt.Println(string(out))
}
