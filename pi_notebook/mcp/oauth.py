"""Bearer JWTs from an OAuth 2.1 authorization server: the MCP server as a resource server.

``serve --http PORT --issuer URL --audience AUD`` accepts a request only with a JWT access token
that an issuer's key signed (RFC 9068 style). The issuer's keys are found once at start through
its metadata (RFC 8414 ``/.well-known/oauth-authorization-server``, else OpenID
``/.well-known/openid-configuration``), whose ``issuer`` must be the one configured and whose
``jwks_uri`` names the key set. The key set is cached and fetched again when it is older than
an hour, or when a token names a key id (``kid``) it does not hold (at most once every
:data:`MIN_REFRESH_S` seconds, so made-up key ids cannot make the server hammer the issuer).

A token is accepted only if all of these hold (anything else is a 401, fail closed):

* its ``alg`` is an asymmetric signature algorithm (:data:`ASYMMETRIC_ALGORITHMS`; never
  ``none`` and never an HMAC, so a public key can never serve as a shared secret), the key
  it names is a signing key of that algorithm, and the signature checks;
* ``iss`` is the issuer, ``aud`` is (or contains) the audience, ``exp`` has not passed (the
  SDK checks it again, without leeway) and ``nbf`` (when present) has, with
  :data:`LEEWAY_S` seconds for clock skew; an RSA key is at least 2048 bits;
* it has a ``sub`` (the person the audit names as requester).

Scopes come from ``scope`` (space-separated text) or else ``scp`` (a list). The raw token is
never kept: the :class:`~mcp.server.auth.provider.AccessToken` handed to the SDK holds a
placeholder, and refusals are logged with their reason only.

What does not belong here: which scope a tool call needs (:mod:`pi_notebook.mcp.scopes`) and
the HTTP app (:mod:`pi_notebook.mcp.serve`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from pi_notebook.errors import ConfigurationError

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "LEEWAY_S",
    "MIN_REFRESH_S",
    "IssuerMetadata",
    "JwksCache",
    "JwtVerifier",
    "discover",
    "discovery_urls",
    "require_secure",
    "token_scopes",
]

log = logging.getLogger("pi_notebook.mcp.oauth")

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The only signature algorithms a token may use."""

LEEWAY_S = 30.0
"""Clock skew allowed on ``nbf`` and ``iat`` (``exp`` is checked again by the SDK, exactly)."""

MIN_REFRESH_S = 30.0
"""The shortest time between two key-set fetches prompted by an unknown ``kid``."""

MAX_AGE_S = 3600.0
"""A key set older than this is fetched again before use."""

TIMEOUT_S = 5.0
"""Seconds for one metadata or key-set request."""

_PLACEHOLDER = "<jwt>"  # what AccessToken.token holds: never the token itself


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_secure(url: str, what: str) -> None:
    """HTTPS, or plain HTTP to this machine only (a test or a local issuer).

    Raises:
        ConfigurationError: any other URL (naming ``what`` it is).
    """
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and _is_loopback(parts.hostname):
        return
    raise ConfigurationError(
        f"the {what} {url!r} must be an https:// URL (plain http only to 127.0.0.1 or localhost)"
    )


def discovery_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may live, in the order they are tried.

    >>> discovery_urls("https://id.example.com")
    ['https://id.example.com/.well-known/oauth-authorization-server', 'https://id.example.com/.well-known/openid-configuration']
    >>> discovery_urls("https://id.example.com/tenant")[0]
    'https://id.example.com/.well-known/oauth-authorization-server/tenant'
    """
    parts = urlsplit(issuer)
    root = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{root}/.well-known/oauth-authorization-server",
            f"{root}/.well-known/openid-configuration",
        ]
    return [
        f"{root}/.well-known/oauth-authorization-server{path}",  # RFC 8414 section 3.1
        f"{root}/.well-known/openid-configuration{path}",
        f"{root}{path}/.well-known/openid-configuration",  # OpenID Connect Discovery 1.0
    ]


@dataclass(frozen=True, kw_only=True)
class IssuerMetadata:
    """What the server uses of an issuer's metadata."""

    issuer: str
    jwks_uri: str
    source: str  # the metadata URL it came from


async def _get_json(client: httpx2.AsyncClient, url: str) -> Any:
    response = await client.get(url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}")
    return response.json()


async def discover(
    issuer: str, *, timeout: float = TIMEOUT_S, client: httpx2.AsyncClient | None = None
) -> IssuerMetadata:
    """Read the issuer's metadata (RFC 8414, else OpenID discovery).

    Raises:
        ConfigurationError: the issuer is not an https URL, no metadata answered, or the
            metadata names another issuer or no usable ``jwks_uri``.
    """
    require_secure(issuer, "issuer")
    failures: list[str] = []
    async with _client(client, timeout) as http:
        for url in discovery_urls(issuer):
            try:
                document = await _get_json(http, url)
            except (httpx2.HTTPError, ValueError) as exc:
                failures.append(f"{url}: {type(exc).__name__} {exc}".strip())
                continue
            if not isinstance(document, dict):
                failures.append(f"{url}: not a JSON object")
                continue
            named = document.get("issuer")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if not isinstance(named, str) or named.rstrip("/") != issuer.rstrip("/"):
                # RFC 8414 section 3.3: metadata naming another issuer must not be used
                raise ConfigurationError(
                    f"the metadata at {url} names the issuer {named!r}, not {issuer!r}"
                )
            jwks_uri = document.get("jwks_uri")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise ConfigurationError(f"the metadata at {url} has no jwks_uri")
            require_secure(jwks_uri, "jwks_uri")
            return IssuerMetadata(issuer=named, jwks_uri=jwks_uri, source=url)
    raise ConfigurationError(
        f"could not read the metadata of the issuer {issuer!r}: " + "; ".join(failures)
    )


class _client:
    """An httpx client for the duration of a block: the one given, or a new one."""

    def __init__(self, given: httpx2.AsyncClient | None, timeout: float) -> None:
        self._given = given
        self._owned: httpx2.AsyncClient | None = None
        self._timeout = timeout

    async def __aenter__(self) -> httpx2.AsyncClient:
        if self._given is not None:
            return self._given
        self._owned = httpx2.AsyncClient(timeout=self._timeout, follow_redirects=False)
        return await self._owned.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        if self._owned is not None:
            await self._owned.__aexit__(*exc)


class JwksCache:
    """The issuer's key set, fetched when first needed, when old, and on an unknown ``kid``.

    A failed fetch keeps the keys already held (a token they verify is still accepted) and is
    logged; with no keys at all every token is refused.
    """

    def __init__(
        self,
        jwks_uri: str,
        *,
        timeout: float = TIMEOUT_S,
        max_age_s: float = MAX_AGE_S,
        min_refresh_s: float = MIN_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        require_secure(jwks_uri, "jwks_uri")
        self.jwks_uri = jwks_uri
        self._timeout = timeout
        self._max_age_s = max_age_s
        self._min_refresh_s = min_refresh_s
        self._clock = clock
        self._keys: list[dict[str, Any]] = []
        self._fetched_at: float | None = None  # the last successful fetch
        self._tried_at: float | None = None  # the last attempt, successful or not
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def candidates(self, kid: str | None) -> list[dict[str, Any]]:
        """The held keys that ``kid`` may mean (all signing keys when the token names none)."""
        if self._stale():
            await self._refresh(kid)
        found = self._matching(kid)
        if not found and kid is not None:
            await self._refresh(kid)  # a rotated key: fetch again, rate-limited
            found = self._matching(kid)
        return found

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._max_age_s

    def _matching(self, kid: str | None) -> list[dict[str, Any]]:
        return [k for k in self._keys if kid is None or k.get("kid") == kid]

    async def _refresh(self, kid: str | None) -> None:
        async with self._lock:
            # Checked again under the lock: a concurrent call may have fetched meanwhile.
            if not self._stale() and (kid is None or self._matching(kid)):
                return
            now = self._clock()
            if self._tried_at is not None and now - self._tried_at < self._min_refresh_s:
                return  # tried moments ago: made-up key ids must not hammer the issuer
            self._tried_at = now
            try:
                async with _client(None, self._timeout) as http:
                    document = await _get_json(http, self.jwks_uri)
            except (httpx2.HTTPError, ValueError) as exc:
                log.warning("could not fetch the key set %s: %s", self.jwks_uri, exc)
                return
            keys = document.get("keys") if isinstance(document, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if not isinstance(keys, list):
                log.warning("the key set at %s has no 'keys' list; keys kept", self.jwks_uri)
                return
            self._keys = [_as_key(k) for k in keys if _signing_key(k)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            self._fetched_at = now
            self.fetches += 1


def _signing_key(key: Any) -> bool:
    """An asymmetric key for signatures (``use`` absent or ``sig``; never a shared secret)."""
    if not isinstance(key, dict):
        return False
    fields: dict[str, Any] = {str(k): v for k, v in key.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return (
        fields.get("kty") in ("RSA", "EC", "OKP")
        and fields.get("use", "sig") == "sig"
        and fields.get("alg", "RS256") in ASYMMETRIC_ALGORITHMS
    )


def _as_key(key: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in key.items()}


def token_scopes(claims: Mapping[str, Any]) -> list[str]:
    """The token's scopes: ``scope`` (space-separated text), else ``scp`` (a list).

    A claim of any other shape grants nothing.

    >>> token_scopes({"scope": "db:read  db:write"})
    ['db:read', 'db:write']
    >>> token_scopes({"scp": ["db:read"]})
    ['db:read']
    >>> token_scopes({"scope": ["db:write"]})
    []
    """
    if "scope" in claims:
        scope = claims["scope"]
        return scope.split() if isinstance(scope, str) else []
    scp = claims.get("scp")
    if isinstance(scp, list) and all(isinstance(s, str) for s in scp):  # pyright: ignore[reportUnknownVariableType]
        return [s for s in scp if s]  # pyright: ignore[reportUnknownVariableType]
    return []


class _Refused(Exception):
    """The token is refused for this reason (never contains the token)."""


class JwtVerifier:
    """The SDK's ``TokenVerifier`` for the issuer's JWT access tokens (see the module docstring).

    ``verify_token`` never raises: any failure is ``None`` (a 401), logged with its reason.
    """

    def __init__(
        self, *, issuer: str, audience: str, keys: JwksCache, leeway_s: float = LEEWAY_S
    ) -> None:
        if not audience:
            raise ConfigurationError("the audience must not be empty")
        self.issuer = issuer
        self.audience = audience
        self.keys = keys
        self.leeway_s = leeway_s

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await self._verify(token)
        except (_Refused, jwt.PyJWTError) as exc:
            log.info("refused a bearer token: %s", _reason(exc))
            return None
        except Exception as exc:  # fail closed, whatever went wrong
            log.warning("refused a bearer token: %s", type(exc).__name__)
            return None
        client_id = claims.get("client_id") or claims.get("azp") or "unknown-client"
        return AccessToken(
            token=_PLACEHOLDER,
            client_id=str(client_id),
            scopes=token_scopes(claims),
            expires_at=int(claims["exp"]),
            subject=claims["sub"],
            claims={"iss": claims["iss"]},
        )

    async def _verify(self, token: str) -> dict[str, Any]:
        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise _Refused(f"algorithm {alg!r} is not an accepted asymmetric signature algorithm")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise _Refused("the key id is not text")
        candidates = [k for k in await self.keys.candidates(kid) if k.get("alg", alg) == alg]
        if not candidates:
            raise _Refused(f"no key of the issuer for kid {kid!r} and algorithm {alg}")
        last: Exception | None = None
        for candidate in candidates:
            try:
                key = jwt.PyJWK(candidate, algorithm=alg)
            except jwt.PyJWTError as exc:  # the key's type does not fit the algorithm
                last = exc
                continue
            try:
                claims = jwt.decode(
                    token,
                    key=key,
                    algorithms=[alg],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway_s,
                    options={
                        "require": ["exp", "iss", "aud", "sub"],
                        "enforce_minimum_key_length": True,  # no RSA key under 2048 bits
                    },
                )
            except jwt.InvalidSignatureError as exc:
                last = exc
                continue  # another key with the same kid (or no kid) may have signed it
            sub = claims.get("sub")
            if not isinstance(sub, str) or not sub.strip():
                raise _Refused("the token has no subject")
            return claims
        raise _Refused(_reason(last) if last is not None else "no usable key")


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
