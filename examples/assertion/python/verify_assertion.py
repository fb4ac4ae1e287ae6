"""Verifying the sidecar's caller assertion in a Python upstream, with PyJWT (pip install
"pyjwt[crypto]", or Debian's python3-jwt and python3-cryptography).

Paste verify_assertion (and the JWKS client) into your server and call it on every request:

    jwks = jwt.PyJWKClient("https://mcp.example.com/.well-known/jwks.json")
    caller = verify_assertion(request.headers.get("X-MCP-Auth-Assertion"), jwks,
                              issuer="https://mcp.example.com",     # the sidecar's PUBLIC_URL
                              audience="http://mcp-server:3000")    # upstream.assertionAudience
    # raises jwt.InvalidTokenError (or ValueError): answer 401
    caller["sub"], caller["mcp_kind"], caller.get("client_id"), caller.get("groups"), ...

As a command: `python3 verify_assertion.py JWKS_URL ISSUER AUDIENCE < assertion` prints the claims
(exit 0) or why the assertion is refused (exit 1).
"""

import json
import sys

import jwt


def verify_assertion(header, jwks, issuer, audience):
    if not header:
        raise ValueError("no X-MCP-Auth-Assertion header")
    # PyJWKClient picks the key by the token's kid, refetching the set for a kid it does not know
    # (a new replica, a rotation).
    key = jwks.get_signing_key_from_jwt(header)
    return jwt.decode(
        header,
        key.key,
        # Only ES256: "none", HMAC (a public key used as a secret) and every other algorithm are refused.
        algorithms=["ES256"],
        issuer=issuer,
        audience=audience,
        options={"require": ["iss", "aud", "sub", "iat", "exp", "mcp_kind"]},
        # 30 s of clock skew between the sidecar's host and this one, for exp and iat.
        leeway=30,
    )


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: verify_assertion.py JWKS_URL ISSUER AUDIENCE < assertion")
    jwks_url, issuer, audience = sys.argv[1:]
    try:
        claims = verify_assertion(sys.stdin.read().strip(), jwt.PyJWKClient(jwks_url), issuer, audience)
    except (jwt.exceptions.PyJWTError, ValueError) as err:
        sys.stderr.write(f"refused: {type(err).__name__}: {err}\n")
        sys.exit(1)
    print(json.dumps(claims))
