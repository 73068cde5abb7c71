"""A URL for every template of every scheme Apprise ships, each with planted secrets.

Apprise describes each service (`Apprise().details()`): its schemes, its URL
templates (`{schema}://{user}:{password}@{host}/{targets}`) and each token's type,
regex and prefix. Every token but the scheme, a network host, the port and fixed
choices gets a fresh random value (one its regex takes, generated from the regex
itself); each of those of 6 characters or more is a planted secret. A URL Apprise
does not take is dropped (it could never be stored); `planted_urls` says which
enabled schemes got none. `HAND_WRITTEN` adds a URL for schemes whose tokens have a
shape no regex states (a phone number where a host goes, a checksummed key).
"""

from __future__ import annotations

import random
import re
import string
from re import _constants as sre
from re import _parser as sre_parse  # noqa: PLC2701 — the stdlib's own regex parser
from typing import NamedTuple

import apprise

ALNUM = string.ascii_letters + string.digits
HOST = "hooks.example.org"
_PHONE = set("0123456789 )(+-")


class Planted(NamedTuple):
    scheme: str
    url: str
    secrets: frozenset[str]


def _hand(url: str, *secrets: str) -> Planted:
    return Planted(url.partition("://")[0], url, frozenset(secrets))


HAND_WRITTEN = [
    _hand(
        "twilio://ACd3adb33fd3adb33fd3adb33fd3adb33f:0123456789abcdef0123456789abcdef"
        "@15551234567/15557654321",
        "ACd3adb33fd3adb33fd3adb33fd3adb33f",
        "0123456789abcdef0123456789abcdef",
    ),
    _hand(
        "exotel://SidSecret7f3a9:TokSecret8b2c4@15551234567/1555765",
        "SidSecret7f3a9",
        "TokSecret8b2c4",
    ),  # fmt: skip
    _hand(
        "ringc://15551234567:TokSecret8b2c4@ClientSecret7f3a9/AppSecret9d1e5/15557654321",
        "TokSecret8b2c4",
        "ClientSecret7f3a9",
        "AppSecret9d1e5",
    ),  # fmt: skip
    _hand("threema://*ABCD123@GwSecret7f3a9q/15557654321", "GwSecret7f3a9q"),
    _hand("humhub://TokSecret8b2c4q@hooks.example.org/123", "TokSecret8b2c4q"),
    _hand("humhubs://TokSecret9c3d5q@hooks.example.org/123", "TokSecret9c3d5q"),
    _hand("pagertree://int_Secret7f3a9qZ", "int_Secret7f3a9qZ"),
    _hand(
        "acs://sender@example.org/QWxhZGRpbjpvcGVuIHNlc2FtZVNlY3JldDdmM2E5cTk=/hooks.example.org",
        "QWxhZGRpbjpvcGVuIHNlc2FtZVNlY3JldDdmM2E5cTk=",
    ),  # fmt: skip
    # APRS-IS passcode of N0CALL (a hash of the call sign: no planted value)
    _hand("aprs://N0CALL:13023@DB0ABC"),
    # the bech32 secret key of the bytes 1..32
    _hand(
        "nostr://nsec1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5z5tpwxqergd3c8g7rusqpqcc2y",
        "nsec1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5z5tpwxqergd3c8g7rusqpqcc2y",
    ),  # fmt: skip
]


def needs_a_package(scheme: str) -> bool:
    """Whether Apprise's service for `scheme` needs a package that is not installed
    (it refuses every URL of it, so none can be stored: amqp:// without pika or
    qpid-proton, which Apprise lists as recommended)."""
    for entry in apprise.Apprise().details(show_requirements=True)["schemas"]:
        if scheme in (*(entry.get("protocols") or ()), *(entry.get("secure_protocols") or ())):
            needs = entry["requirements"]
            return bool(needs["packages_required"] or needs["packages_recommended"])
    return False


def planted_urls(seed: int = 41) -> tuple[list[Planted], set[str], set[str]]:
    """(one accepted URL per template of each scheme, the enabled schemes, those of
    them no URL was accepted for)."""
    accepted: dict[tuple[str, str], Planted] = {}
    enabled: set[str] = set()
    for entry in apprise.Apprise().details(show_requirements=True)["schemas"]:
        schemes = [*(entry.get("protocols") or ()), *(entry.get("secure_protocols") or ())]
        enabled.update(schemes)
        details = entry["details"]
        for scheme in schemes:
            for template in details["templates"]:
                rng = random.Random(f"{seed} {scheme} {template}")  # whatever Apprise's order
                for _ in range(6):  # random values: another try may suit the regexes
                    planted = _filled(rng, scheme, template, details["tokens"])
                    if apprise.Apprise.instantiate(planted.url) is not None:
                        accepted[(scheme, template)] = planted
                        break
    planted = list(accepted.values())
    planted += [p for p in HAND_WRITTEN if apprise.Apprise.instantiate(p.url) is not None]
    covered = {p.scheme for p in planted}
    return planted, enabled, enabled - covered


def _filled(rng: random.Random, scheme: str, template: str, tokens: dict) -> Planted:
    secrets: set[str] = set()

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "schema":
            return scheme
        text, secret = _value(rng, name, tokens.get(name, {}), tokens)
        if secret and len(text.lstrip("@#+/")) >= 6:
            secrets.add(text.lstrip("@#+/"))
        return text

    url = re.sub(r"\{(\w+)\}", value, template)
    return Planted(scheme, url, frozenset(secrets))


def _value(rng: random.Random, name: str, token: dict, tokens: dict) -> tuple[str, bool]:
    """A value for one token, and whether it is a planted secret."""
    kind = token.get("type", "string")
    if name == "host" and not token.get("regex"):
        return HOST, False
    if name == "port":
        return "8443", False
    if kind.startswith("choice"):
        return _choice(token), False
    if kind == "bool":
        return "yes", False
    if kind == "float":
        return "1.5", False
    if kind == "int":
        return _number(rng, token)
    if kind == "email":
        return f"Sx{_random(rng, 10)}@example.org", True
    if name == "path":
        return f"/{_random(rng, 20)}/", True
    if kind.startswith("list") and not token.get("regex"):
        for member in re.findall(r"'(\w+)'", str(token.get("group", ""))):
            if tokens.get(member, {}).get("regex"):
                return _value(rng, member, tokens[member], tokens)
    return token.get("prefix", "") + _string(rng, token), True


def _choice(token: dict) -> str:
    values = token.get("values") or []
    if isinstance(values, str):
        values = re.findall(r"'([^']*)'", values)
    return str(token.get("default") or (sorted(values)[0] if values else "x"))


def _number(rng: random.Random, token: dict) -> tuple[str, bool]:
    low = token.get("min") if token.get("min") is not None else 0
    high = token.get("max") if token.get("max") is not None else 10**12
    if high - low > 10**8:
        return str(rng.randint(max(low, 10**7), min(high, 10**12))), True
    return str(rng.randint(low, high)), False


def _string(rng: random.Random, token: dict) -> str:
    regex = token.get("regex")
    if not regex:
        return f"Sx{_random(rng, 22)}"
    pattern, flags = regex if isinstance(regex, list | tuple) else (regex, "")
    flags = re.I if "i" in (flags or "") else 0
    return "".join(_generated(rng, list(sre_parse.parse(pattern, flags))))


def _random(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(ALNUM) for _ in range(length))


def _generated(rng: random.Random, items: list) -> list[str]:
    """Characters a parsed regex matches: literals, one of each class, repeats filled
    (11 of a phone-number class, else up to 24)."""
    out: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            out.append(chr(av))
        elif op is sre.NOT_LITERAL:
            out.append(rng.choice([c for c in ALNUM if ord(c) != av]))
        elif op is sre.ANY:
            out.append(rng.choice(ALNUM))
        elif op is sre.IN:
            out.append(rng.choice(_class(av)))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, body = av
            want = 11 if _phone_like(list(body)) else 24
            for _ in range(max(low, min(high, want))):
                out += _generated(rng, list(body))
        elif op is sre.SUBPATTERN:
            out += _generated(rng, list(av[3]))
        elif op is sre.BRANCH:
            out += _generated(rng, list(av[1][0]))
        elif op is sre.ATOMIC_GROUP:
            out += _generated(rng, list(av))
    return out


def _class(members) -> list[str]:
    allowed: set[str] = set()
    negate = False
    for op, av in members:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            allowed.add(chr(av))
        elif op is sre.RANGE:
            allowed |= {chr(x) for x in range(av[0], min(av[1], 0x7E) + 1)}
        elif op is sre.CATEGORY:
            words = {
                sre.CATEGORY_DIGIT: string.digits,
                sre.CATEGORY_WORD: ALNUM + "_",
                sre.CATEGORY_SPACE: " ",
            }
            allowed |= set(words.get(av, ALNUM))
    if negate:
        return [c for c in ALNUM + "-_.~" if c not in allowed] or ["~"]
    return sorted(c for c in allowed if c in ALNUM) or sorted(allowed) or ["x"]


def _phone_like(items: list) -> bool:
    return len(items) == 1 and items[0][0] is sre.IN and set(_class(items[0][1])) <= _PHONE
