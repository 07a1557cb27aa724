"""Passwords out of everything Headgate shows: the one masking rule.

A store URL carries its password (`postgresql://app:PASSWORD@db/app`, or
`?password=PASSWORD`), and a URL reaches output by many paths: the line `headgate
serve` prints, an error naming the store, a log line, an exception's message.
`masked` is applied on every one of them (and, as a last defence, to every log
line: see `_logs`), so the rule lives here once:

* the password of a URL's userinfo (`scheme://user:PASSWORD@`), however it is
  spelled: percent-encoded or not, in a URL SQLAlchemy can parse or not, in any
  scheme (`postgres://` as platforms write it). It runs to the token's last `@`:
  an unencoded `@` in a password hides more of the URL, never less of the secret.
  Such a URL is ambiguous, and a parser that splits it at the first `@`
  (SQLAlchemy's) hands the rest of the password to the driver as the host name,
  which the driver's message then quotes on its own: so what follows each `@`
  of such a password is remembered too (`passwords_in`);
* the same in anything URL-like, malformed included: a token (a run without
  whitespace, starting a line or after a space, a quote, a bracket, `=`, `,`,
  `;`) shaped `[anything/]user:PASSWORD@...`, as a mistyped URL is written
  (`u:PW@host`, `//u:PW@h/db`, `postgresql:/u:PW@h`, `postgresql//u:PW@h`).
  Which `:` begins the password is a guess there, so the earliest one that can
  is taken: more of the URL may be hidden (`postgresql:***@h` for
  `postgresql:u:PW@h`), never less of the secret. Text that merely holds a
  colon and an `@` in one token (`kind:a@b`) is masked too: a small price;
  an e-mail address (no `:` before its `@`) and `host:port` are left alone;
* the value of every parameter whose name ends in `password`: in a URL's query
  (`?password=`, `sslpassword=`, its name percent-encoded or not), in a libpq
  connection string (`password=... `), in a mapping's repr (`'password': '...'`);
* every password of a store URL this process opened (`remember_secrets`), wherever
  it appears: a driver's message may quote one in a form none of the above
  recognises (libpq echoes a malformed percent-encoded token whole).

What is masked becomes `***`, the mark SQLAlchemy uses (`postgres:***@host`).
"""

from __future__ import annotations

import re
import threading
from typing import Final
from urllib.parse import quote, unquote

__all__ = ["MASK", "masked", "passwords_in", "remember_secrets"]

MASK: Final = "***"
MIN_REMEMBERED: Final = 4
"""Shorter passwords are masked only where a URL or a parameter name frames them:
masking every occurrence of a two-letter string would make log lines unreadable."""
MAX_REMEMBERED: Final = 64

_USERINFO_PASSWORD: Final = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/]*:)"
    r"(?P<password>\S*(?=@)|[^\s@/]+(?:[ \t]+[^\s@/]+){1,4}(?=@))"
)
"""`scheme://user:` and everything to the last `@` before the next whitespace, or
(a password typed with spaces in it) to the next `@` a few words on, with no `/`
between (`postgresql://db:5432/app failed for ada@example.com` holds none).
The user part may hold an `@` (SQLAlchemy reads `a@b:pw@host` as user `a@b`)."""
_LOOSE_USERINFO: Final = re.compile(
    r"""(?<![^\s'"(<\[{,;=|>])"""  # a token's start
    r"""(?P<head>[^\s'":/\\@]*[:/\\]*[/\\][^\s'":/\\]*:|[^\s'":/\\]+:(?![/\\]))"""
    r"""(?P<password>\S*)(?=@)"""
)
"""`user:` (after anything ending in slashes: `//`, `scheme:/`, `scheme//`) at a
token's start, and everything to the token's last `@`: a URL however mistyped.
A user or a slash before the `:` is needed (`"key":"a@b"` in JSON is no URL), and
a `:` followed by a slash is a scheme's (`postgresql://app@db` holds no password)."""
_WHOLE_URL_USERINFO: Final = re.compile(
    r"""\s*(?:[^\s'":/\\@]*[:/\\]*[/\\][^'":/\\]*:|[^'":/\\]+:(?![/\\]))(?P<password>.*)@""",
    re.DOTALL,
)
"""A URL given whole (to be opened) read as the loose rule reads a token, its
password allowed spaces: a password typed unencoded with a space in it."""
_QUERY_PARAMETER: Final = re.compile(r"(?P<head>[?&;](?P<key>[^=&;#\s]+)=)(?P<value>[^&;#\s]*)")
"""`?name=value` in a URL's query; the name percent-decoded before it is judged."""
_PASSWORD_FIELD: Final = re.compile(
    r"""(?P<head>(?<![A-Za-z0-9_])(?P<key>[A-Za-z0-9_.\-]*password)['"]?\s*[=:]\s*)"""
    r"""(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;#,)}\]'"]*)""",
    re.IGNORECASE,
)
"""`password=value`, `sslpassword: value`, `'password': 'value'`: a libpq connection
string's parameter, a mapping's item, a log line's field."""

_lock = threading.Lock()
_remembered: tuple[str, ...] = ()
"""Replaced whole under the lock, never changed in place: `masked` reads it unlocked."""


def masked(text: str) -> str:
    """`text` with every password in it replaced by `***` (see the module docstring)."""
    if "://" in text:
        text = _USERINFO_PASSWORD.sub(_mask_userinfo, text)
    if "@" in text and ":" in text:
        text = _LOOSE_USERINFO.sub(_mask_userinfo, text)
    if "=" in text:
        text = _QUERY_PARAMETER.sub(_mask_parameter, text)
    if "password" in text.lower():
        text = _PASSWORD_FIELD.sub(_mask_parameter, text)
    for secret in _remembered:
        text = text.replace(secret, MASK)
    return text


def remember_secrets(*secrets: str | None) -> None:
    """Mask these wherever they appear from now on: the passwords of a store URL
    being opened, in each spelling they may be quoted in (as given, percent-decoded,
    percent-encoded)."""
    global _remembered  # noqa: PLW0603 (the one process-wide list, swapped whole)
    found = {
        spelling
        for secret in secrets
        if secret
        for spelling in (secret, unquote(secret), quote(secret, safe=""))
    }
    with _lock:
        new = [s for s in found if len(s) >= MIN_REMEMBERED and s not in _remembered]
        if new:
            # The longest first: a secret that contains another is masked whole.
            kept = sorted({*_remembered, *new}, key=len, reverse=True)
            _remembered = tuple(kept[:MAX_REMEMBERED])


def passwords_in(url: str) -> list[str]:
    """The passwords `masked` would hide in a URL, and the pieces of them a parser
    may take for something else (see the module): to remember before it is opened."""
    found = []
    whole = _WHOLE_URL_USERINFO.match(url)
    userinfo = [*_USERINFO_PASSWORD.finditer(url), *_LOOSE_USERINFO.finditer(url)]
    for password in [m["password"] for m in userinfo] + ([whole["password"]] if whole else []):
        found += [password, *_pieces_after_at_signs(password)]
    for rule in (_QUERY_PARAMETER, _PASSWORD_FIELD):
        found += [m["value"].strip("'\"") for m in rule.finditer(url) if _is_password(m["key"])]
    return found


def _pieces_after_at_signs(password: str) -> list[str]:
    """`a@b@c` -> `b@c`, `c`: what a parser splitting at one of its `@` signs
    takes for the host name."""
    return [password[at + 1 :] for at, char in enumerate(password) if char == "@"]


def _mask_userinfo(match: re.Match[str]) -> str:
    return match["head"] + MASK if match["password"] not in ("", MASK) else match[0]


def _mask_parameter(match: re.Match[str]) -> str:
    if not _is_password(match["key"]) or match["value"].strip("'\"") in ("", MASK):
        return match[0]
    value = match["value"]
    mark = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['head']}{mark}{MASK}{mark}"


def _is_password(key: str) -> bool:
    return unquote(key).lower().endswith("password")
