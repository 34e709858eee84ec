"""A test OAuth issuer: RSA keys made here, its metadata and JWKS served on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey


def rsa_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}


class TestIssuer:
    """An authorization server that only publishes what a resource server reads.

    ``documents`` maps a path to the JSON served there; ``keys`` (kid -> private key) are
    published at ``/jwks`` with ``extra_jwks`` and can be changed while it runs (key
    rotation). ``hits`` counts the requests per path.
    """

    __test__ = False

    def __init__(self, *, path: str = "", metadata: str = "oauth") -> None:
        self.keys: dict[str, RSAPrivateKey] = {"k1": rsa_key()}
        self.extra_jwks: list[dict[str, Any]] = []  # published as they are
        self.hits: dict[str, int] = {}
        self.documents: dict[str, Any] = {}
        issuer = self
        self._metadata_kind = metadata

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.hits[self.path] = issuer.hits.get(self.path, 0) + 1
                if self.path == "/jwks":
                    published = [public_jwk(k, kid) for kid, k in issuer.keys.items()]
                    body: Any = {"keys": published + issuer.extra_jwks}
                else:
                    body = issuer.documents.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self._server.server_address[1]
        self.root = f"http://127.0.0.1:{port}"
        self.url = f"{self.root}{path}"
        self.jwks_uri = f"{self.root}/jwks"
        document = {"issuer": self.url, "jwks_uri": self.jwks_uri}
        if metadata == "oauth":  # RFC 8414: the well-known segment goes before the path
            self.documents[f"/.well-known/oauth-authorization-server{path}"] = document
        else:  # OpenID Connect Discovery: appended to the issuer
            self.documents[f"{path}/.well-known/openid-configuration"] = document
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TestIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def token(
        self,
        *,
        sub: str | None = "alice",
        aud: str | list[str] = "pi-notebook",
        scope: str | None = "db:read",
        kid: str = "k1",
        key: RSAPrivateKey | None = None,
        lifetime: float = 300,
        **claims: Any,
    ) -> str:
        """A signed access token; any claim can be overridden (``None`` leaves it out)."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.url,
            "aud": aud,
            "sub": sub,
            "iat": now,
            "exp": now + int(lifetime),
            "client_id": "test-client",
            "scope": scope,
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        signer = key if key is not None else self.keys[kid]
        return jwt.encode(body, signer, algorithm="RS256", headers={"kid": kid})
