"""Redaction and truncation of audit payloads (S29).

Redaction runs on the JSON-safe payload before it is hashed and stored, so the audit never
holds a full credential: not in a URL, not in a header, not in a ``password=`` pair, not
under a key named like a secret. Truncation then bounds the stored size and leaves a note of
the original size. What counts as a secret is configurable: ``Redactor`` takes patterns and
secret key names, and ``Redactor.extend`` adds to the defaults. The canonical JSON text and its
truncation are :mod:`.json_text`'s (``dumps`` and ``truncate``, re-exported here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .json_text import dumps, truncate
from .redact_sql import redact_sql

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_SECRET_KEYS",
    "RedactionPattern",
    "Redactor",
    "dumps",
    "truncate",
]

MASK = "***"


@dataclass(frozen=True, kw_only=True)
class RedactionPattern:
    """A named regular expression whose ``secret`` group (or whole match) is masked.

    Attributes:
        name: A short label, for configuration and tests.
        regex: The pattern. If it has a group named ``secret`` only that group is masked, so
            the context around it (``postgresql://user:``, ``Bearer``) stays readable.
        triggers: Lower-case literals of which at least one occurs (case-insensitively) in
            any match; a text without them skips the regex. Empty means always run it.
    """

    name: str
    regex: str
    triggers: tuple[str, ...] = ()


DEFAULT_PATTERNS: tuple[RedactionPattern, ...] = (
    # scheme://user:PASSWORD@host — the password only; user and host stay for the audit.
    RedactionPattern(
        name="url_password",
        regex=r"[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*:(?P<secret>[^/?#\s]+)@",
        triggers=("://",),
    ),
    RedactionPattern(name="anthropic_key", regex=r"sk-ant-[A-Za-z0-9_\-]{8,}", triggers=("sk-",)),
    RedactionPattern(name="openai_key", regex=r"\bsk-[A-Za-z0-9_\-]{16,}", triggers=("sk-",)),
    RedactionPattern(
        name="aws_access_key", regex=r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", triggers=("akia", "asia")
    ),
    RedactionPattern(
        name="github_token",
        regex=r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    RedactionPattern(
        name="slack_token", regex=r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", triggers=("xox",)
    ),
    RedactionPattern(name="google_api_key", regex=r"\bAIza[0-9A-Za-z_\-]{30,}", triggers=("aiza",)),
    RedactionPattern(
        name="bearer",
        regex=r"(?i)\b(?:bearer|basic|token)\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})",
        triggers=("bearer", "basic", "token"),
    ),
    RedactionPattern(
        name="secret_pair",
        regex=r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
        r"|client[_-]?secret|aws_secret_access_key)\b[\"']?\s*(?:=|:|\s+)\s*"
        r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\s&;,\"'})]+)",
        triggers=("passw", "pwd", "secret", "api", "token"),
    ),
    RedactionPattern(
        name="private_key",
        regex=r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        triggers=("private key",),
    ),
)

DEFAULT_SECRET_KEYS = (
    r"(?i)^(?:.*[_\-])?(?:password|passwd|pwd|secret|api[_\-]?key|apikey|token|access[_\-]?token"
    r"|refresh[_\-]?token|auth[_\-]?token|authorization|credentials?|private[_\-]?key"
    r"|client[_\-]?secret|cookie|set[_\-]?cookie)$"
)


DEFAULT_SECRET_KEY_LITERALS = (
    "passw",
    "pwd",
    "secret",
    "api",
    "token",
    "auth",
    "credential",
    "private",
    "cookie",
)
"""One of these is in (the lower case of) every key that ``DEFAULT_SECRET_KEYS`` matches."""


def _fold(text: str) -> str:
    """``text`` folded as a ``(?i)`` pattern folds it, for substring tests of ASCII literals:
    ``casefold`` maps ``ſ`` to ``s`` and ``K`` to ``k`` (``lower`` does not), and the dotless and
    dotted I that ``re`` also matches to ``i`` become ``i``."""
    return text.casefold().replace("\u0131", "i").replace("\u0307", "")


def _trie(literals: Iterable[str]) -> str:
    """A regex that matches where any of ``literals`` does, with shared prefixes factored."""
    heads: dict[str, list[str]] = {}
    whole = False
    for literal in literals:
        if literal:
            heads.setdefault(literal[0], []).append(literal[1:])
        else:
            whole = True
    if whole:  # the empty literal: it matches everywhere, whatever follows
        return ""
    branches = [
        re.escape(head) + (rest if len(tails) == 1 or not rest else f"(?:{rest})")
        for head, tails in heads.items()
        for rest in [_trie(tails)]
    ]
    return branches[0] if len(branches) == 1 else "|".join(branches)


class Redactor:
    """Masks credentials in JSON-safe payloads.

    Args:
        patterns: Patterns applied to every string value (and key). Defaults to
            ``DEFAULT_PATTERNS``: URL passwords, OpenAI/Anthropic/AWS/GitHub/Slack/Google keys,
            bearer tokens, ``password=...`` style pairs and PEM private keys.
        secret_keys: A regular expression over mapping keys; a string or number stored under a
            matching key is masked whole (``{"password": "***"}``).
        mask: The replacement text.
    """

    def __init__(
        self,
        patterns: Iterable[RedactionPattern] = DEFAULT_PATTERNS,
        *,
        secret_keys: str | None = DEFAULT_SECRET_KEYS,
        mask: str = MASK,
    ) -> None:
        self.patterns = tuple(patterns)
        self.secret_keys = secret_keys
        self.mask = mask
        self._compiled = [(p.triggers, re.compile(p.regex)) for p in self.patterns]
        self._key_re = re.compile(secret_keys) if secret_keys else None
        self._key_cache: dict[str, bool] = {}
        self._shape_cache: dict[tuple[str, ...], bool] = {}
        # The JSON-text shortcut in ``redact_json`` is sound only if a match inside a string
        # value is also a match inside the JSON text; anchors and lookbehinds can break that.
        self._text_check_ok = not any(_EDGE_SENSITIVE.search(p.regex) for p in self.patterns)
        # Substring tests on the lower-cased text (~0.1 µs each; a case-insensitive regex
        # alternation of the same literals costs ~40 µs): most text has no trigger at all,
        # and then no pattern needs to run. Patterns without triggers disable the shortcut.
        self._all_triggers = tuple(
            dict.fromkeys(t.lower() for p in self.patterns for t in p.triggers)
        )
        self._always = any(not p.triggers for p in self.patterns)
        # The clean-text shortcut of ``redact_json``: literals of which a text holds at least
        # one if any pattern or any secret key can match in it. Known for the default key
        # names only (a custom ``secret_keys`` regex goes the way of its keys); a literal that
        # holds another is dropped (a text with it has the shorter one).
        self._clean_literals: tuple[str, ...] | None = None
        if secret_keys == DEFAULT_SECRET_KEYS and not self._always and self._text_check_ok:
            found = dict.fromkeys((*self._all_triggers, *DEFAULT_SECRET_KEY_LITERALS))
            self._clean_literals = tuple(
                lit for lit in found if not any(o != lit and o in lit for o in found)
            )
        # The same test as one regex search: the literals as a trie (``a(?:kia|iza|pi)|...``),
        # so each position of the text is tried against the few literals of its character
        # (one scan of the text instead of one per literal: ~1.3 against ~2.2 µs).
        self._clean_re = (
            None if self._clean_literals is None else re.compile(_trie(self._clean_literals))
        )
        # Text with escapes takes the same shortcut when no literal holds a character an
        # escape of ``_PLAIN_ESCAPE`` stands for (a quote, a backslash, a control character):
        # then a literal in the decoded text lies between escapes, verbatim in the JSON text.
        self._escapes_ok = self._clean_literals is not None and not any(
            c in '"\\' or ord(c) < 0x20 for lit in self._clean_literals for c in lit
        )

    def extend(self, *patterns: RedactionPattern) -> Redactor:
        """A new redactor with ``patterns`` added to this one's."""
        return Redactor((*self.patterns, *patterns), secret_keys=self.secret_keys, mask=self.mask)

    def _candidates(self, text: str) -> list[re.Pattern[str]]:
        lowered = _fold(text)
        if not self._always:
            for trigger in self._all_triggers:
                if trigger in lowered:
                    break
            else:
                return []
        return [
            rx
            for triggers, rx in self._compiled
            if not triggers or any(t in lowered for t in triggers)
        ]

    def redact_text(self, text: str) -> str:
        """``text`` with every match of every pattern masked; SQL text first has the values
        bound to secret-named columns masked (see :mod:`.redact_sql`)."""
        if self._key_re is not None:  # redact_sql leaves text that does not look like SQL
            text = redact_sql(text, self.is_secret_key, self.mask)
        for rx in self._candidates(text):
            text = rx.sub(self._replace, text)
        return text

    def _replace(self, match: re.Match[str]) -> str:
        if "secret" in match.re.groupindex and match.group("secret") is not None:
            start, end = match.span("secret")
            base = match.start()
            whole = match.group(0)
            return whole[: start - base] + self.mask + whole[end - base :]
        return self.mask

    def is_secret_key(self, key: str) -> bool:
        """Whether a value stored under ``key`` is masked whole."""
        found = self._key_cache.get(key)
        if found is None:
            found = self._key_re is not None and self._key_re.match(key) is not None
            if len(self._key_cache) > 10_000:  # keys are few in practice; stay bounded anyway
                self._key_cache.clear()
            self._key_cache[key] = found
        return found

    def redact_json(self, text: str, value: Any = None) -> tuple[str, Any]:
        """Redact a payload given as canonical JSON ``text`` (and, if at hand, its ``value``).

        Returns the redacted text and value (``value`` may be ``None`` when nothing needed
        masking). The common clean payload costs one scan of its text: every string and key
        of the payload appears verbatim in the text once its escapes are decoded (a payload
        with no backslash needs no decoding), so no match there means no match anywhere.
        """
        if self._text_check_ok:
            escaped = "\\" in text
            clean_re = self._clean_re if self._clean_literals is not None else None
            if clean_re is not None:
                # Every key and string of the payload is in the text verbatim (no escapes),
                # and ``_fold`` (``lower()`` for ASCII text) folds case as the patterns' (?i)
                # does: a text without any literal has no match and no secret key (one scan,
                # no key list). With escapes, each one becomes a NUL (in no literal); an
                # escape of any other kind (``\\u0070`` for ``p``) leaves its backslash: the
                # long way.
                probe = _PLAIN_ESCAPE.sub("\x00", text) if escaped and self._escapes_ok else text
                if "\\" not in probe and (
                    clean_re.search(probe.lower() if probe.isascii() else _fold(probe)) is None
                ):
                    return text, value
            probe = _ESCAPE.sub(_unescape, text) if escaped else text
            hit = any(rx.search(probe) for rx in self._candidates(probe))
            if not hit and self._key_re is not None:
                keys = _JSON_KEY.findall(text)
                if escaped and any("\\" in k for k in keys):
                    # Only a key with an escape (or a quote escaped in a value) captures a
                    # backslash here: then parse the keys escape-aware.
                    keys = [_decode_key(k) for k in _JSON_KEY_ESCAPED.findall(text)]
                # Payloads of one kind share their keys: judge each set of keys once.
                shape = tuple(keys)
                found = self._shape_cache.get(shape)
                if found is None:
                    found = any(self.is_secret_key(key) for key in keys)
                    if len(self._shape_cache) > 10_000:
                        self._shape_cache.clear()
                    self._shape_cache[shape] = found
                hit = found
            if not hit and self._key_re is not None and _SQL_WORD.search(probe):
                # A statement may bind a value to a secret-named column (``INSERT ...
                # (password) VALUES (...)``): the long way when it names one.
                hit = any(self.is_secret_key(word) for word in _WORD.findall(probe))
            if not hit:
                return text, value
        redacted = self.redact(json.loads(text) if value is None else value)
        return dumps(redacted), redacted

    def redact(self, value: Any) -> Any:
        """A copy of the JSON-safe ``value`` with credentials masked (``value`` is not changed)."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                skey = self.redact_text(key) if isinstance(key, str) else key
                if (
                    isinstance(key, str)
                    and self.is_secret_key(key)
                    and item is not None
                    and isinstance(item, str | int | float)
                    and not isinstance(item, bool)
                ):
                    out[skey] = self.mask
                else:
                    out[skey] = self.redact(item)
            return out
        if isinstance(value, list | tuple):
            return [self.redact(v) for v in value]
        return value


_SQL_WORD = re.compile(
    r"(?i)\b(?:insert|update|upsert|replace|merge|select|with|values|delete|copy|call|set|table)\b"
)
_WORD = re.compile(r"[^\W\d][\w$]*")
_JSON_KEY = re.compile(r'"([^"]*)":')
# Keys of JSON text with escapes: a quote inside a key is escaped, so a key ends at the first
# unescaped quote followed by a colon.
_JSON_KEY_ESCAPED = re.compile(r'"((?:[^"\\]|\\.)*)":')
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
# The escapes a JSON encoder writes for a quote, a backslash and control characters: what
# each stands for is in no literal of the clean-text shortcut (``_escapes_ok``).
_PLAIN_ESCAPE = re.compile(r'\\(?:["\\bfnrt]|u00[01][0-9a-fA-F])')
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unescape(match: re.Match[str]) -> str:
    code, char = match.group(1), match.group(2)
    if code is not None:
        return chr(int(code, 16))
    return _SIMPLE_ESCAPES.get(char, char)


def _decode_key(key: str) -> str:
    if "\\" not in key:
        return key
    try:
        return json.loads(f'"{key}"')
    except ValueError:  # not valid JSON after all: judge the raw text
        return key


# Anchors and lookarounds (but not a negated class "[^"): these may judge a string's edges
# differently from the same characters inside JSON text.
_EDGE_SENSITIVE = re.compile(r"(?<!\[)\^|\$|\(\?<?[=!]|\\[AZzB]")
