"""Finding an issuer's keys and checking its tokens, in process: discovery (RFC 8414 and
OpenID), the cached key set and its refresh on rotation, scopes, and the serve options."""

from __future__ import annotations

import asyncio
import doctest
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1
from cryptography.hazmat.primitives.asymmetric.ec import generate_private_key as ec_key

import pi_notebook.mcp.oauth as oauth
from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp.oauth import JwksCache, JwtVerifier, discover, token_scopes
from pi_notebook.mcp.serve import main
from tests.mcp.mcp_support import child_env
from tests.mcp.oauth_support import TestIssuer, rsa_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(oauth).failed == 0


@pytest.mark.parametrize(
    ("path", "kind"), [("", "oauth"), ("/tenant", "oauth"), ("", "openid"), ("/tenant", "openid")]
)
async def test_discovery_finds_the_jwks_uri_through_either_metadata(path: str, kind: str) -> None:
    with TestIssuer(path=path, metadata=kind) as issuer:
        found = await discover(issuer.url)
    assert found.jwks_uri == issuer.jwks_uri and found.issuer == issuer.url
    expected = (
        f"/.well-known/oauth-authorization-server{path}"
        if kind == "oauth"
        else f"{path}/.well-known/openid-configuration"
    )
    assert found.source == issuer.root + expected


async def test_metadata_naming_another_issuer_is_refused() -> None:
    with TestIssuer() as issuer:
        issuer.documents["/.well-known/oauth-authorization-server"]["issuer"] = "https://evil"
        with pytest.raises(ConfigurationError, match="names the issuer 'https://evil'"):
            await discover(issuer.url)


@pytest.mark.parametrize(
    "url", ["http://id.example.com", "ftp://127.0.0.1/x", "https://", "not a url"]
)
async def test_an_issuer_must_be_https_unless_on_this_machine(url: str) -> None:
    with pytest.raises(ConfigurationError, match="https://"):
        await discover(url)


async def test_an_unreachable_issuer_is_a_configuration_error() -> None:
    with TestIssuer() as issuer:
        url = issuer.url
    with pytest.raises(ConfigurationError, match="could not read the metadata"):
        await discover(url, timeout=2)


async def test_a_rotated_key_is_fetched_once_and_made_up_kids_are_rate_limited() -> None:
    clock = Clock()
    with TestIssuer() as issuer:
        keys = JwksCache(issuer.jwks_uri, clock=clock, min_refresh_s=30)
        verifier = JwtVerifier(issuer=issuer.url, audience="pi-notebook", keys=keys)
        first = await verifier.verify_token(issuer.token(sub="ana"))
        assert first is not None and first.subject == "ana" and first.token == "<jwt>"
        assert issuer.hits["/jwks"] == 1
        # The issuer rotates to a new key: its kid is unknown, so the set is fetched again
        # (at most once per 30 s).
        clock.now += 31
        issuer.keys["k2"] = rsa_key()
        rotated = await verifier.verify_token(issuer.token(kid="k2", sub="bo"))
        assert rotated is not None and rotated.subject == "bo"
        assert issuer.hits["/jwks"] == 2
        stranger = rsa_key()
        for n in range(5):  # made-up key ids: no fetch within 30 s of the last one
            assert await verifier.verify_token(issuer.token(key=stranger, kid=f"x{n}")) is None
        assert issuer.hits["/jwks"] == 2
        assert await verifier.verify_token(issuer.token(kid="k1")) is not None  # cached
        clock.now += 3601  # an old set is fetched again before use
        assert await verifier.verify_token(issuer.token(kid="k1")) is not None
        assert issuer.hits["/jwks"] == 3


async def test_concurrent_first_tokens_fetch_the_key_set_once() -> None:
    with TestIssuer() as issuer:
        verifier = JwtVerifier(
            issuer=issuer.url, audience="pi-notebook", keys=JwksCache(issuer.jwks_uri)
        )
        found = await asyncio.gather(*(verifier.verify_token(issuer.token()) for _ in range(8)))
        assert all(f is not None for f in found)
        assert issuer.hits["/jwks"] == 1


async def test_the_key_set_unreachable_refuses_every_token() -> None:
    with TestIssuer() as issuer:
        token, jwks_uri = issuer.token(), issuer.jwks_uri
    verifier = JwtVerifier(
        issuer=issuer.url, audience="pi-notebook", keys=JwksCache(jwks_uri, timeout=2)
    )
    assert await verifier.verify_token(token) is None


async def test_an_audience_list_containing_ours_is_accepted() -> None:
    with TestIssuer() as issuer:
        verifier = JwtVerifier(
            issuer=issuer.url, audience="pi-notebook", keys=JwksCache(issuer.jwks_uri)
        )
        assert await verifier.verify_token(issuer.token(aud=["other", "pi-notebook"])) is not None
        assert await verifier.verify_token(issuer.token(aud=["other", "third"])) is None


async def test_only_asymmetric_signing_keys_of_the_tokens_algorithm_verify() -> None:
    with TestIssuer() as issuer:
        verifier = JwtVerifier(
            issuer=issuer.url, audience="pi-notebook", keys=JwksCache(issuer.jwks_uri)
        )
        claims = {
            "iss": issuer.url,
            "aud": "pi-notebook",
            "sub": "ana",
            "scope": "db:read",
            "exp": int(time.time()) + 300,
        }
        ec = ec_key(SECP256R1())
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec.public_key()))
        issuer.extra_jwks += [
            {**ec_jwk, "kid": "ec", "alg": "ES256"},
            {**ec_jwk, "kid": "ec-enc", "use": "enc"},  # an encryption key never verifies
            {"kty": "oct", "kid": "shared", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh4eHh4eA"},
        ]
        weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        issuer.keys["weak"] = weak
        es256 = jwt.encode(claims, ec, algorithm="ES256", headers={"kid": "ec"})
        accepted = await verifier.verify_token(es256)
        assert accepted is not None and accepted.subject == "ana"
        enc = jwt.encode(claims, ec, algorithm="ES256", headers={"kid": "ec-enc"})
        assert await verifier.verify_token(enc) is None
        secret = b"secret-secret-secret-secret-xxxxxx"
        hs = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "shared"})
        assert await verifier.verify_token(hs) is None
        # The RSA key's kid with an EC algorithm: the key's type does not fit; refused.
        mixed = jwt.encode(claims, ec, algorithm="ES256", headers={"kid": "k1"})
        assert await verifier.verify_token(mixed) is None
        # A short RSA key in the set does not verify, even with a valid signature.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyJWT warns when signing with a short key
            short = jwt.encode(claims, weak, algorithm="RS256", headers={"kid": "weak"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as in production: a warning would not refuse it
            assert await verifier.verify_token(short) is None
        assert await verifier.verify_token(issuer.token()) is not None  # the good key still is


@pytest.mark.parametrize(
    ("claims", "scopes"),
    [
        ({"scope": "db:read db:write"}, ["db:read", "db:write"]),
        ({"scp": ["db:read"]}, ["db:read"]),
        ({"scope": "db:read", "scp": ["db:write"]}, ["db:read"]),  # scope wins
        ({"scope": 7}, []),
        ({"scp": "db:write"}, []),
        ({"scp": ["db:read", 3]}, []),
        ({}, []),
    ],
)
def test_scopes_come_from_scope_text_or_an_scp_list(
    claims: dict[str, object], scopes: list[str]
) -> None:
    assert token_scopes(claims) == scopes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--http", "0", "--issuer", "http://127.0.0.1:9/"],
            "give --issuer and --audience together",
        ),
        (["--issuer", "http://127.0.0.1:9/", "--audience", "a"], "apply to --http only"),
        (
            ["--http", "0", "--issuer", "http://id.example.com", "--audience", "a"],
            "must be an https",
        ),
        (["--http", "0", "--issuer", "http://127.0.0.1:9", "--audience", " "], "must not be empty"),
        (["--http", "0", "--resource-url", "https://mcp.example.com/mcp"], "with --issuer only"),
        (
            [
                "--http",
                "0",
                "--issuer",
                "http://127.0.0.1:9",
                "--audience",
                "a",
                "--resource-url",
                "http://mcp.example.com/mcp",
            ],
            "must be an https",
        ),
        (
            [
                "--http",
                "0",
                "--issuer",
                "http://127.0.0.1:9",
                "--audience",
                "a",
                "--resource-url",
                "https://mcp.example.com/db",
            ],
            "must end in /mcp",
        ),
    ],
)
def test_the_server_does_not_start_with_a_bad_issuer_setting(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = f"sqlite:///{tmp_path / 'x.sqlite'}"
    assert main(["serve", "--database-url", database, *args]) == 2
    out, err = capsys.readouterr()
    assert message in err and "listening" not in out


def test_an_issuer_that_does_not_answer_stops_the_start_with_the_reason(tmp_path: Path) -> None:
    with TestIssuer() as issuer:
        url = issuer.url  # closed again: nothing answers there now
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_notebook.mcp",
            "serve",
            "--database-url",
            f"sqlite:///{tmp_path / 'x.sqlite'}",
            "--http",
            "0",
            "--issuer",
            url,
            "--audience",
            "pi-notebook",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(PI_NOTEBOOK_DATA_DIR=str(tmp_path)),
    )
    assert done.returncode == 2, done.stderr
    assert f"could not read the metadata of the issuer '{url}'" in done.stderr
    assert "listening" not in done.stdout
