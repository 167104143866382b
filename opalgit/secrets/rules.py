"""The catalogue of secrets: what counts as one, and how each kind is recognized.

Pure: no pygit2, no environment, no printing. :mod:`opalgit.secrets.redact` holds the
engine (:class:`opalgit.secrets.redact.Rules`) that runs these rules and the redactor that
replaces what they find.

* :data:`BUILTIN_RULES`: well-known token formats (each with its prefix, length and
  alphabet), private key blocks, URLs with passwords, ``.env`` lines whose key
  names a secret, and ``key: value`` assignments gated by an entropy test so that
  stand-ins such as ``changeme``, ``${VAR}`` or ``<your-key>`` are left alone. Each
  is a :class:`Rule`: a regex, the group that is the secret, the keywords that must
  occur for the rule to run (and, for an *anchored* rule, where its regex is
  tried), and the tests a value must pass.
* :func:`key_kind` / :func:`pair_kind`: whether a key name (``DB_PASSWORD``,
  ``apiKey``) says that its value is a secret.
* :class:`Prefilter`: what a built-in rule's regex needs around a keyword, cheap
  to test on whole texts, so that the engine runs the rule only where it can match.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Callable, Union

from opalgit.structs import dataclass

__all__ = [
    "BUILTIN_NAMES",
    "BUILTIN_RULES",
    "PLACEHOLDER_PREFIX",
    "PLACEHOLDER_RE",
    "Prefilter",
    "Rule",
    "key_kind",
    "keyed_value_ok",
    "pair_kind",
    "shannon_entropy",
]

class LazyPattern:
    """A regex compiled the first time it is used.

    Compiling the built-in rules' regexes took ~12 ms of every process that imports
    this module, and a commit of a few turns runs only the rules whose keywords its
    new text holds. Stands in for :class:`re.Pattern` where the rules use one
    (``match``, ``finditer``, ``search``, ``groups``, ``groupindex``, ``pattern``).
    """

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        rx = self._compiled
        if rx is None:
            rx = self._compiled = re.compile(self._source, self._flags)
        return rx

    def __getattr__(self, name: str):
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source!r})"


PLACEHOLDER_PREFIX = "opal-secret:"
_KIND_PATTERN = r"[a-z0-9]+(?:-[a-z0-9]+)*"
KIND_RE = LazyPattern(_KIND_PATTERN)
#: A placeholder: plain ASCII without quotes, backslashes, ``$``, globs or spaces, so
#: it is safe unquoted in JSON strings, shell words, URLs and ``.env`` values. The hex
#: part has a fixed length, so a placeholder followed by more letters still parses.
PLACEHOLDER_RE = LazyPattern(r"opal-secret:(" + _KIND_PATTERN + r"):([0-9a-f]{12})")

# ---------------------------------------------------------------------- value tests

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_KEYCHARS = _ALNUM | frozenset("_.-")
_ENV_KEYCHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def shannon_entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character."""
    n = len(s)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _classes(s: str) -> int:
    """How many of lower case, upper case and digits ``s`` uses."""
    return any("a" <= c <= "z" for c in s) + any("A" <= c <= "Z" for c in s) + any("0" <= c <= "9" for c in s)


_COMMON_VALUES = frozenset(
    """password passwd pass pwd secret secrets token changeme change_me changeit example sample
    test testing dummy fake none null nil true false undefined redacted hidden placeholder todo tbd
    foo bar foobar baz qux xxx password1 mypassword mysecret yourpassword secretkey apikey api_key
    your_api_key access_token""".split()
)
_TEMPLATE_RE = LazyPattern(r"^\$|\$\{|\$\(|\{\{|\}\}|%\(|%s|<[^<>]*>|\.\.\.|\*\*\*")
_FAKE_RE = LazyPattern(
    r"(?i)your|example|sample|dummy|placeholder|changeme|redacted|insert.?here|replace.?me|xxxx|(.)\1{5}"
)
# A code reference (``process.env.API_KEY``, ``self.password``, ``get_key()``): segments
# that read as words (lower, UPPER, camelCase, PascalCase), unlike a random password.
_SEGMENT = r"(?:_*[a-z]+(?:_[a-z]+)*|[A-Z]+(?:_[A-Z]+)*|[a-z]+(?:[A-Z][a-z]+)+|(?:[A-Z][a-z]+)+)[0-9]?"
_REFERENCE_RE = LazyPattern(_SEGMENT + r"(?:\." + _SEGMENT + r")+(?:\(\))?|" + _SEGMENT + r"\(\)")


def _fake_token(v: str) -> bool:
    """A token-shaped stand-in from documentation (``ghp_xxxx…``, ``…EXAMPLE``, ``<your-key>``)."""
    return _FAKE_RE.search(v) is not None


def _placeholder_value(v: str) -> bool:
    """An assigned value that is a template, a reference or a stand-in, not a secret."""
    return (
        v.lower() in _COMMON_VALUES
        or _fake_token(v)
        or _TEMPLATE_RE.search(v) is not None
        or len(set(v)) < 4
        or _REFERENCE_RE.fullmatch(v) is not None
    )


# ------------------------------------------------------------------------- key names

_WORDS_RE = LazyPattern(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SECRET_PARTS = frozenset(
    "password passwd passphrase pwd pass secret token apikey credential credentials auth "
    "authorization privatekey accesskey secretkey".split()
)
_PASSWORD_PARTS = frozenset("password passwd passphrase pwd pass".split())
#: ``X_key`` names whose value is a secret (``api_key``); ``sort_key`` or ``cache_key`` are not.
_KEY_QUALIFIERS = frozenset(
    "api access secret private signing encryption encrypt decryption master client auth account "
    "storage service app admin session subscription license shared webhook consumer deploy ssh "
    "hmac jwt oauth bot integration management root".split()
)
#: A last name part that makes the value metadata about a secret, not the secret.
_NOT_SECRET_LAST = frozenset(
    "id ids type types path paths file files dir directory url uri urls endpoint host name names "
    "length len ttl expiry expires expiration expire timeout count size enabled enable disabled "
    "prefix suffix header field alg algorithm hint required min max policy format version env var "
    "variable rotation at in on by limit limits mode status label kind usage used fingerprint "
    "location provider store source scope scopes method index idx arn ref reference regex pattern "
    "placeholder example description desc help text prompt manager strategy class handler cmd "
    "command flag option options config server issuer audience created updated tokens".split()
)
_NEVER_PARTS = frozenset("public publishable pub".split())


@lru_cache(maxsize=8192)
def key_kind(name: str, env: bool = False) -> str | None:
    """``"password"`` or ``"generic-secret"`` if a key name says its value is a secret.

    ``env`` applies the looser ``.env`` convention that any ``…_KEY`` is a secret.
    """
    if PLACEHOLDER_PREFIX in name or len(name) > 80:
        return None
    parts = [p.lower() for p in _WORDS_RE.findall(name)]
    if not parts or parts[-1] in _NOT_SECRET_LAST or _NEVER_PARTS.intersection(parts):
        return None
    if _PASSWORD_PARTS.intersection(parts):
        return "password"
    if _SECRET_PARTS.intersection(parts):
        return "generic-secret"
    if parts[-1] == "key" and len(parts) >= 2 and (env or parts[-2] in _KEY_QUALIFIERS):
        return "generic-secret"
    if "".join(parts).endswith(("apikey", "accesskey", "secretkey", "privatekey", "authtoken")):
        return "generic-secret"
    return None


# ----------------------------------------------------------------------------- rules

Check = Callable[[str, "re.Match[str]", int, int], bool]


@dataclass(frozen=True)
class Prefilter:
    """A necessary condition for a rule to find a secret, cheap to test on a whole text.

    The text holds ``anchor`` (a literal, looked for in the text lower-cased, or as
    it is when ``exact``) followed right away by a match of ``tail`` (a regex; a
    lookbehind in it may look back over the anchor; its group names, if any, start
    with ``pf_``). ``at`` says where the anchor stands from the start of the keyword
    (None: anywhere in the text). ``needs``: characters that every match holds; a
    text without one of them is not searched (a test for one character is a
    ``memchr``, many times faster than the search).

    The promise a rule's prefilters make: wherever the rule's regex, tried where one
    of its keywords occurs (``back`` characters before it), matches and the match is
    accepted, the text also holds a match of one of the prefilters that list that
    keyword (``keywords`` empty: all the rule's keywords), with its anchor ``at``
    characters after the keyword's start. :class:`opalgit.secrets.redact.Rules` then tries
    the rule there only; ``tests/unit/test_redact_speed.py`` checks the promise.
    """

    anchor: str
    tail: str = ""
    keywords: tuple = ()
    exact: bool = False
    at: int | None = 0
    needs: str = ""  # characters every match holds: a text without one is not searched


@dataclass(frozen=True)
class Rule:
    """One detection rule; its ``name`` is the kind shown in placeholders and scans.

    A rule runs on a text only if one of its ``keywords`` occurs in it (compared
    case-insensitively); a rule without keywords runs on every text. An
    ``anchored`` rule's regex is tried only where a keyword occurs, ``back``
    characters before it; otherwise it is scanned over the whole text. The secret is
    ``group`` of the match (a number, a name, or a tuple of names of which the first
    that took part counts). ``prefilters`` (built-ins) narrow that further: the rule
    is tried only at the keywords, and the places, one of them vouches for.
    """

    name: str
    regex: "re.Pattern | LazyPattern"
    group: Union[int, str, tuple] = 0
    keywords: tuple = ()
    anchored: bool = False
    back: int = 0
    entropy: float | None = None  # minimum Shannon entropy, bits per character
    min_length: int = 1
    min_classes: int = 0  # of lower case, upper case, digits
    priority: int = 50  # lower wins when two matches overlap
    edges: bool = False  # the secret may not be glued to letters or digits
    fake_filter: str = ""  # "token": skip stand-ins like ghp_xxxx; "value": templates, references too
    check: Check | None = None  # built-ins: one more test on (text, match, start, end)
    prefilters: tuple = ()  # Prefilter conditions that cover every keyword (built-ins)
    builtin: bool = False
    description: str = ""

    def span(self, m: "re.Match[str]") -> tuple[int, int]:
        group = self.group
        if isinstance(group, tuple):
            for g in group:
                if m.group(g) is not None:
                    return m.span(g)
            return (-1, -1)
        return m.span(group)

    def accepts(self, text: str, m: "re.Match[str]", a: int, b: int) -> bool:
        secret = text[a:b]
        if len(secret) < self.min_length:
            return False
        if self.edges and not (_left_ok(text, a) and (b >= len(text) or text[b] not in _ALNUM)):
            return False
        if self.min_classes and _classes(secret) < self.min_classes:
            return False
        if self.entropy is not None and shannon_entropy(secret) < self.entropy:
            return False
        if self.fake_filter == "token" and _fake_token(secret):
            return False
        if self.fake_filter == "value" and _placeholder_value(secret):
            return False
        return self.check is None or self.check(text, m, a, b)


_ESCAPED_BEFORE = LazyPattern(r"(?:\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|%[0-9A-Fa-f]{2})$")


def _left_ok(text: str, i: int) -> bool:
    """Nothing glued on the left, except an escape just before: a JSON ``\\n``, a
    ``\\u003c``, a ``\\x3d`` or a URL's ``%3D`` (a token right after ``=``, ``<``)."""
    if i == 0 or text[i - 1] not in _ALNUM or (i >= 2 and text[i - 2] == "\\"):
        return True
    return _ESCAPED_BEFORE.search(text, max(0, i - 6), i) is not None


def _key_before(text: str, m: "re.Match[str]", kw_group: str = "kw") -> str:
    """The whole key name around a keyword: ``aws_secret_access_key`` from ``secret``."""
    k0 = m.start(kw_group)
    stop = max(0, k0 - 60)
    while k0 > stop and text[k0 - 1] in _KEYCHARS:
        k0 -= 1
    return text[k0 : m.end("rest")]


_CALL_RE = LazyPattern(r"[A-Za-z_][A-Za-z0-9_.]*\(")


def _env_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    k0 = m.start("kw")
    stop = max(0, k0 - 60)
    while k0 > stop and text[k0 - 1] in _ENV_KEYCHARS:
        k0 -= 1
    key = text[k0 : m.end("rest")]
    if not key[0].isalpha() or (k0 > 0 and (text[k0 - 1] in "$." or not _left_ok(text, k0))):
        return False
    if key_kind(key, env=True) is None:
        return False
    value = text[a:b]
    if _CALL_RE.match(value):
        return False  # SECRET_KEY=os.environ.get('SECRET_KEY'): code, not a value
    return not (value.isdigit() and len(value) < 12)


def _pair_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    return _left_ok(text, m.start()) and key_kind(m.group("name"), env=True) is not None


def _assignment_check(kind: str) -> Check:
    def check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
        key = _key_before(text, m)
        if m.group("op") == " " and not key.startswith("-"):
            return False  # "token abc" in prose; only "--token abc" on a command line
        return key_kind(key.lstrip("-.")) == kind

    return check


def _aws_secret_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    key = _key_before(text, m).lower()
    return "aws" in key or "access" in key


_URL_PATH_CHARS = LazyPattern(r"[/?#]")


def _url_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    s = m.start()
    if not (s > 0 and text[s - 1] in _ALNUM):  # a scheme before "://"
        return False
    cut = _URL_PATH_CHARS.search(text, a, b)
    # ``host:8080/path?to=me@x``: a port and a path, not a password with '/' in it.
    return cut is None or not (text[a : cut.start()].isdigit() or cut.start() == a)


def _basic_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    s = m.start()
    return not text.startswith("-u", s) or (s > 0 and text[s - 1].isspace())


def _sas_check(text: str, m: "re.Match[str]", a: int, b: int) -> bool:
    return "sv=" in text


_Q = r"(?:\\{0,3}[\"'])?\]?"  # a closing quote (maybe escaped: JSON in JSON) or subscript
_OP = r"\s{0,4}(?::=|=>|[:=])\s{0,4}"
_VALUE = (
    r"(?:(?P<q>\\{0,3}[\"'`])(?P<qv>[^\"'`\\\s]{1,300})(?P=q)"
    r"|(?P<uv>[A-Za-z0-9_\-+/=.~!@%^*]{1,300})(?=[\s,;'\"`)}\]\\]|$))"
)


def _assignment_regex(words: str) -> LazyPattern:
    return LazyPattern(
        r"(?ai:(?P<kw>" + words + r"))(?P<rest>[A-Za-z0-9_.\-]{0,40}?)" + _Q + r"(?P<op>" + _OP + r"|[ ])" + _VALUE
    )


_PEM_CLASS = r"(?:[A-Za-z0-9+/=\s:,\\]|-(?!----))"
_PEM_RE = LazyPattern(
    r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----"
    r"(?:\s|\\[rn])*"
    # Armor headers (PGP's Version:, Comment:, Hash:; RFC 4880 7.): one per line.
    r"(?:[A-Za-z][A-Za-z0-9\-]{0,40}: ?[^\n\\]{0,300}(?:\r?\n|\\r\\n|\\n))*"
    r"(?:\s|\\[rn])*"
    r"(?:(?P<body>" + _PEM_CLASS + r"{16,20000}?)(?:\s|\\[rn])*-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----"
    r"|(?P<cut>[A-Za-z0-9+/=]{16,}(?:(?:\s|\\[rn])+[A-Za-z0-9+/=]{16,})*))"
)

# Prefilters (see Prefilter): each is the start of its rule's regex, relaxed. They run
# on the text lower-cased, so [A-Z] becomes [a-z]; classes keep every character the
# rule's class takes, and a class that could meet a masked placeholder (NUL in the
# rule's view) takes the placeholder's own characters too. Anchors start with a rare
# character where one exists, because the search skips from anchor to anchor.
_PF_KEYCHAR = r"[a-z0-9_.\-]"
_PF_Q = r"(?:\\{0,3}[\"'])?\]?"


def _pf_run(name: str, most: int) -> str:
    """A whole run of key characters (at most ``most``), never given back: a
    lookahead is atomic, and the backreference takes what it matched. Nothing that
    may follow a key (a quote, a space, ``:``, ``=``) is a key character, so giving
    characters back could not help a match; it would only cost time."""
    return f"(?=(?P<{name}>{_PF_KEYCHAR}{{0,{most}}}))(?P={name})"


def _pf_assign(word: str) -> str:
    """After a key word: the rest of the key, a closing quote, then ``:``/``=``
    (``key: v``, ``KEY=v``, ``"key" => v``); or a space where the key starts with
    ``-`` (``--token v``), so that a key character stands just before the word."""
    return (
        f"(?:(?<=[a-z0-9_.\\-]{word}){_pf_run(f'pf_{word}_a', 60)}{_PF_Q}(?:\\s{{0,4}}[:=]| )"
        f"|{_pf_run(f'pf_{word}_b', 60)}{_PF_Q}\\s{{0,4}}[:=])"
    )


#: Per key word: the anchor, the tail up to the word's end, and where the anchor
#: stands in the word. Anchors start with the word's rarest letter that they can.
_PF_WORDS = {
    "key": ("k", "ey", 0),
    "token": ("k", "en(?<=token)", 2),
    "secret": ("cr", "et(?<=secret)", 2),
    "credential": ("cr", "edential", 0),
    "auth": ("uth", "(?<=auth)", 1),
    "pass": ("pass", "", 0),
    "pwd": ("w", "d(?<=pwd)", 1),
}


def _assigned(*words: str) -> tuple:
    """Prefilters for rules anchored at a key word followed by an assignment."""
    out = []
    for w in words:
        anchor, head, at = _PF_WORDS[w]
        out.append(Prefilter(anchor, head + _pf_assign(w), (w,), at=at))
    return tuple(out)


_TOKEN = dict(anchored=True, edges=True, fake_filter="token", builtin=True, priority=10)
_ASSIGNED = dict(fake_filter="value", builtin=True)


def _tok(name: str, regex: str, keywords: tuple, prefilters: tuple, description: str, **kw) -> Rule:
    """A token format recognized by its prefix, length and alphabet."""
    return Rule(name, LazyPattern(regex), keywords=keywords, prefilters=prefilters,
                description=description, **{**_TOKEN, **kw})


def _more_tokens() -> list[Rule]:
    """Token formats of more providers: their published prefixes, with lengths a little
    looser where a format has varied. Their prefilters share the anchors the gate
    already searches ("-", "g", "k", "cr", "://", an exact "A"; one rare literal,
    "ya29."), with a lookbehind for the rest of the prefix: each new anchor is one
    more search of every text, and an "_" anchor alone cost half of the redaction
    time of the bench's session."""
    P = Prefilter
    # One alternative of the "-" search for five "prefix-body" formats: a tail that
    # several rules declare alike is searched once and vouches for all of them.
    dash = r"(?<=[a-z0-9.]{2}-)[a-z0-9]{16}"
    return [
        _tok("sendgrid-key", r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", ("SG.",),
             (P("g", r"\.(?<=sg\.)[a-z0-9_\-]{22}\.", at=1),), "SendGrid API keys (SG.….…)"),
        _tok("groq-key", r"gsk_[A-Za-z0-9]{52}", ("gsk_",), (P("g", r"sk_[a-z0-9]{52}"),), "Groq API keys (gsk_…)"),
        _tok("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_\-]{28}", ("GOCSPX-",),
             (P("g", r"ocspx-[a-z0-9_\-]{28}"),), "Google OAuth client secrets (GOCSPX-…)"),
        _tok("google-oauth-token", r"ya29\.[A-Za-z0-9_\-]{30,}", ("ya29.",),
             (P("ya29.", r"[a-z0-9_\-]{30}"),), "Google OAuth access tokens (ya29.…)"),
        _tok("pypi-token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", ("pypi-",),
             (P("A", r"(?<=pypi-A)gEIcHlwaS5vcmc[A-Za-z0-9_\-]{50}", exact=True, at=5),), "PyPI upload tokens (pypi-AgEI…)"),
        _tok("figma-token", r"figd_[A-Za-z0-9_\-]{40}", ("figd_",),
             (P("g", r"d_(?<=figd_)[a-z0-9_\-]{40}", at=2),), "Figma tokens (figd_…)"),
        _tok("docker-token", r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{27,}", ("dckr_pat_", "dckr_oat_"),
             (P("k", r"r_(?:pat|oat)_(?<=dckr_..._)[a-z0-9_\-]{27}", at=2),), "Docker Hub tokens (dckr_pat_…)"),
        _tok("pulumi-token", r"pul-[a-f0-9]{40}", ("pul-",), (P("-", dash, at=3),),
             "Pulumi access tokens (pul-…)"),
        _tok("xai-key", r"xai-[A-Za-z0-9]{80}", ("xai-",), (P("-", dash, at=3),),
             "xAI API keys (xai-…)"),
        _tok("perplexity-key", r"pplx-[A-Za-z0-9]{48}", ("pplx-",), (P("-", dash, at=4),),
             "Perplexity API keys (pplx-…)"),
        _tok("pinecone-key", r"pcsk_[A-Za-z0-9_]{50,}", ("pcsk_",), (P("k", r"_(?<=pcsk_)[a-z0-9_]{50}", at=3),),
             "Pinecone API keys (pcsk_…)"),
        _tok("tavily-key", r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}", ("tvly-",),
             (P("-", r"(?<=tvly-)(?:dev-|prod-)?[a-z0-9]{32}", at=4),), "Tavily API keys (tvly-…)"),
        _tok("grafana-token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2}", ("glsa_", "glc_"),
             (P("g", r"l(?:sa_[a-z0-9]{32}_|c_[a-z0-9+/]{32})"),), "Grafana service account and cloud tokens"),
        _tok("rubygems-key", r"rubygems_[a-f0-9]{48}", ("rubygems_",),
             (P("g", r"ems_(?<=rubygems_)[a-f0-9]{48}", at=4),), "RubyGems API keys (rubygems_…)"),
        _tok("postman-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("PMAK-",),
             (P("A", r"K-(?<=PMAK-)[a-f0-9]{24}-", exact=True, at=2),), "Postman API keys (PMAK-…)"),
        _tok("newrelic-key", r"NRAK-[A-Z0-9]{27}", ("NRAK-",), (P("A", r"K-(?<=NRAK-)[A-Z0-9]{27}", exact=True, at=2),),
             "New Relic user API keys (NRAK-…)"),
        _tok("heroku-key", r"HRKU-[A-Za-z0-9_\-]{40,}", ("HRKU-",), (P("-", r"(?<=hrku-)[a-z0-9_\-]{40}", at=4),),
             "Heroku API keys (HRKU-…)"),
        _tok("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("AGE-SECRET-KEY-1",),
             (P("A", r"GE-SECRET-KEY-1[A-Z0-9]{58}", exact=True),), "age encryption secret keys"),
        _tok("alibaba-key-id", r"LTAI[A-Za-z0-9]{20}", ("LTAI",),
             (P("A", r"I(?<=LTAI)[A-Za-z0-9]{20}", exact=True, at=2),), "Alibaba Cloud access key ids (LTAI…)",
             min_classes=2),
        _tok("atlassian-token", r"ATATT3[A-Za-z0-9_\-=]{100,}", ("ATATT3",),
             (P("A", r"TATT3[A-Za-z0-9_\-=]{100}", exact=True),), "Atlassian API tokens (ATATT3…)"),
        _tok("square-token", r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,43}", ("sq0atp-", "sq0csp-"),
             (P("-", r"(?<=sq0atp-|sq0csp-)[a-z0-9_\-]{22}", at=6),), "Square access tokens and secrets"),
        _tok("mailgun-key", r"key-[a-f0-9]{32}", ("key-",), (P("k", r"ey-[a-f0-9]{32}"),), "Mailgun API keys (key-…)"),
        _tok("mailchimp-key", r"[a-f0-9]{32}-us[0-9]{1,2}", ("-us",),
             (P("-", r"us[0-9](?<=[a-f0-9]{32}-us[0-9])"),), "Mailchimp API keys (…-us21)", back=32),
        # (often glued to "bot" in an API URL: the regex bounds it, not the edges test)
        _tok("telegram-bot-token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])", (":AA",),
             (P("A", r"(?<=[0-9]:A)A[A-Za-z0-9_\-]{33}", exact=True, at=None),), "Telegram bot tokens (123456789:AA…)",
             anchored=False, edges=False),
        _tok("brevo-key", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", ("xkeysib-",),
             (P("k", r"eysib-[a-f0-9]{64}", at=1),), "Brevo (Sendinblue) API keys (xkeysib-…)"),
        _tok("flutterwave-key", r"FLWSECK(?:_TEST)?-[a-f0-9]{32}-X", ("FLWSECK",),
             (P("k", r"(?<=flwseck)(?:_test)?-[a-f0-9]{32}", at=6),), "Flutterwave secret keys (FLWSECK-…)"),
        _tok("cloudflare-origin-key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ("v1.0-",),
             (P("-", dash, at=4),), "Cloudflare Origin CA keys (v1.0-…)"),
        _tok("supabase-key", r"sb_secret_[A-Za-z0-9_\-]{31,}", ("sb_secret_",),
             (P("cr", r"et_(?<=sb_secret_)[a-z0-9_\-]{31}", at=5),), "Supabase secret keys (sb_secret_…)"),
        _tok("notion-token", r"secret_[A-Za-z0-9]{43}", ("secret_",),
             (P("cr", r"et_(?<=secret_)[a-z0-9]{43}", at=2),), "Notion integration tokens (secret_…)", min_classes=2),
        _tok("firecrawl-key", r"fc-[a-f0-9]{32}", ("fc-",), (P("-", dash, at=2),),
             "Firecrawl API keys (fc-…)", min_classes=2),
        _tok("openrouter-key", r"sk-or-v1-[a-f0-9]{64}", ("sk-or-v1-",), (P("k", r"-or-v1-(?<=sk-or-v1-)[a-f0-9]{64}", at=1),),
             "OpenRouter API keys (sk-or-v1-…)"),
        _tok("discord-webhook", r"(?:(?<=://)|(?<=://ptb\.)|(?<=://canary\.))discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/"
             r"(?P<s>[A-Za-z0-9_\-]{60,68})",
             ("discord",), (P("://", r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17}", at=None),), "the secret part of Discord webhook URLs",
             group="s"),
    ]


def _builtin_rules() -> list[Rule]:
    c = LazyPattern
    return [
        Rule(
            "private-key",
            _PEM_RE,
            ("body", "cut"),
            keywords=("-----BEGIN ",),
            prefilters=(Prefilter("-", r"----begin (?:[a-z0-9]+ )*private key"),),
            anchored=True,
            priority=0,
            builtin=True,
            description="PEM private key blocks (RSA, EC, DSA, OpenSSH, PKCS#8, PGP), also inside JSON",
        ),
        Rule(
            "aws-access-key-id",
            c(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"),
            keywords=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
            prefilters=(Prefilter("A", r"(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}", exact=True),),
            **_TOKEN,
            description="AWS access key ids (AKIA…, ASIA…)",
        ),
        Rule(
            "aws-secret-access-key",
            c(
                r"(?ai:(?P<kw>secret)(?P<rest>_?(?:access_?)?key))"
                + _Q
                + _OP
                + _Q
                + r"(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
            ),
            "s",
            keywords=("secret",),
            min_classes=2,
            check=_aws_secret_check,
            prefilters=_assigned("secret"),
            **_TOKEN,
            description='AWS secret access keys in assignments (aws_secret_access_key=, "SecretAccessKey":)',
        ),
        Rule(
            "gcp-api-key",
            c(r"AIza[0-9A-Za-z_\-]{35}"),
            keywords=("AIza",),
            prefilters=(Prefilter("A", r"Iza[0-9A-Za-z_\-]{35}", exact=True),),
            **_TOKEN,
            description="Google API keys (AIza…)",
        ),
        Rule(
            "azure-storage-key",
            c(r"AccountKey=(?P<s>[A-Za-z0-9+/]{86,88}={0,2})"),
            "s",
            keywords=("AccountKey=",),
            prefilters=(Prefilter("A", r"ccountKey=[A-Za-z0-9+/]{86}", exact=True),),
            **_TOKEN,
            description="Azure storage account keys (connection strings: AccountKey=…)",
        ),
        Rule(
            "azure-shared-access-key",
            c(r"SharedAccessKey=(?P<s>[A-Za-z0-9+/]{42,44}={0,2})"),
            "s",
            keywords=("SharedAccessKey=",),
            prefilters=(Prefilter("A", r"ccessKey=(?<=SharedAccessKey=)[A-Za-z0-9+/]{42}", exact=True, at=6),),
            **_TOKEN,
            description="Azure Service Bus / Event Hubs shared access keys",
        ),
        Rule(
            "azure-sas-signature",
            c(r"[?&;]sig=(?P<s>[A-Za-z0-9%+/]{30,}(?:%3D|=){0,2})"),
            "s",
            keywords=("sig=",),
            prefilters=(Prefilter("g", r"=(?<=[?&;]sig=)[a-z0-9%+/]{30}", at=2),),
            back=1,
            min_classes=2,
            check=_sas_check,
            **_TOKEN,
            description="the signature of Azure shared access signature URLs (sv=…&sig=…)",
        ),
        Rule(
            "azure-client-secret",
            c(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}"),
            keywords=("Q~",),
            prefilters=(Prefilter("Q~", r"(?<=[A-Za-z0-9_~.]{3}[0-9]Q~)[A-Za-z0-9_~.\-]{31}", exact=True, needs="~"),),
            back=4,
            **_TOKEN,
            description="Azure AD / Entra ID client secrets (…8Q~…)",
        ),
        Rule(
            "github-token",
            c(r"gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255}"),
            keywords=("gh", "github_pat_"),
            prefilters=(
                Prefilter("g", r"h[pousr]_[a-z0-9]{36}", ("gh",)),
                Prefilter("g", r"ithub_pat_[a-z0-9_]{22}", ("github_pat_",)),
            ),
            **_TOKEN,
            description="GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
        ),
        Rule(
            "gitlab-token",
            c(r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|oas)-[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]+)*"),
            keywords=("gl",),
            prefilters=(Prefilter("g", r"l(?:pat|dt|rt|ptt|ft|soat|cbt|imt|oas)-[a-z0-9_\-]{20}"),),
            **_TOKEN,
            description="GitLab tokens (glpat-, gldt-, glrt-, …)",
        ),
        Rule(
            "slack-token",
            c(r"xox[abposre]-[A-Za-z0-9\-]{10,250}|xapp-[0-9]-[A-Za-z0-9\-]{10,250}"),
            keywords=("xox", "xapp-"),
            prefilters=(
                Prefilter("-", r"(?<=xox[abposre]-)[a-z0-9\-]{10}", ("xox",), at=4),
                Prefilter("-", r"(?<=xapp-)[0-9]-[a-z0-9\-]{10}", ("xapp-",), at=4),
            ),
            **_TOKEN,
            description="Slack tokens (xoxb-, xoxp-, xoxa-, xapp-, …)",
        ),
        Rule(
            "slack-webhook",
            c(r"hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/(?P<s>[A-Za-z0-9]{20,})"),
            "s",
            keywords=("hooks.slack.com",),
            prefilters=(
                Prefilter("k", r"s\.slack\.com/(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/t", at=3),
            ),
            **_TOKEN,
            description="the secret part of Slack webhook URLs",
        ),
        Rule(
            "stripe-key",
            c(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,247}|whsec_[A-Za-z0-9+/=]{24,}"),
            keywords=("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
            prefilters=(
                Prefilter(
                    "k",
                    r"_(?<=[sr]k_)(?:live|test)_[a-z0-9]{10}",
                    ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
                    at=1,
                ),
                Prefilter("w", r"hsec_[a-z0-9+/=]{24}", ("whsec_",)),
            ),
            **_TOKEN,
            description="Stripe secret and restricted keys (sk_live_, rk_live_, sk_test_), webhook secrets",
        ),
        Rule(
            "anthropic-key",
            c(r"sk-ant-[A-Za-z0-9_\-]{20,}"),
            keywords=("sk-ant-",),
            prefilters=(Prefilter("k", r"-(?<=sk-)[a-z0-9_\-]{20}", at=1),),
            **_TOKEN,
            description="Anthropic API keys (sk-ant-…)",
        ),
        Rule(
            "openai-key",
            c(r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}|sk-[A-Za-z0-9]{32,}"),
            keywords=("sk-",),
            prefilters=(Prefilter("k", r"-(?<=sk-)[a-z0-9_\-]{20}", at=1),),
            min_classes=2,
            **_TOKEN,
            description="OpenAI and compatible API keys (sk-…, sk-proj-…)",
        ),
        Rule(
            "huggingface-token",
            c(r"hf_[A-Za-z0-9]{30,40}"),
            keywords=("hf_",),
            prefilters=(Prefilter("hf_", r"[a-z0-9]{30}"),),
            min_classes=2,
            **_TOKEN,
            description="Hugging Face tokens (hf_…)",
        ),
        Rule(
            "npm-token",
            c(r"npm_[A-Za-z0-9]{36}"),
            keywords=("npm_",),
            prefilters=(Prefilter("m", r"_(?<=npm_)[a-z0-9]{36}", at=2),),
            **_TOKEN,
            description="npm tokens (npm_…)",
        ),
        Rule(
            "jwt",
            c(r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
            keywords=("eyJ",),
            prefilters=(
                Prefilter(
                    "J", r"(?<=eyJ)[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10}", exact=True, at=2
                ),
            ),
            **_TOKEN,
            description="JSON Web Tokens (eyJ….eyJ….…)",
        ),
        *_more_tokens(),
        Rule(
            "url-password",
            # The password may hold '/', '?' and '#' (unencoded, as people write them);
            # _url_check tells it from a port followed by a path.
            c(r"://(?P<user>[^\s:/?#@'\"<>\\]{0,128}):(?P<s>[^\s@'\"<>\\]{1,256})@(?=[A-Za-z0-9\[])"),
            "s",
            keywords=("://",),
            prefilters=(Prefilter("://", r"[^\s@'\"<>\\]{1,385}@", needs="@"),),
            anchored=True,
            priority=20,
            check=_url_check,
            **_ASSIGNED,
            description="passwords in URLs (postgres://user:pass@host, redis://:pass@host, https://user:pass@host)",
        ),
        Rule(
            "bearer-token",
            c(r"(?ai:bearer)\s+(?P<s>[A-Za-z0-9\-._~+/]{16,}=*)(?![A-Za-z0-9\-._~+/=])"),
            "s",
            keywords=("bearer",),
            prefilters=(Prefilter("bearer", r"\s+[a-z0-9\-._~+/]{16}"),),
            anchored=True,
            entropy=3.0,
            min_classes=2,
            priority=25,
            **_ASSIGNED,
            description="bearer tokens (Authorization: Bearer …)",
        ),
        Rule(
            "basic-auth",
            c(
                r"(?ai:authorization:\s*basic)\s+(?P<h>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
                r"|(?:-u\s*|--user[= ])['\"]?[^\s:'\"]{1,64}:(?P<u>[^\s'\"]{1,256})"
            ),
            ("h", "u"),
            keywords=("authorization", "-u", "--user"),
            prefilters=(
                Prefilter("uth", r"(?<=auth)orization:\s*basic\s+[a-z0-9+/]{8}", ("authorization",), at=1),
                Prefilter("-", r"u\s*['\"]?[^\s'\"]{1,64}:", ("-u",)),
                Prefilter("-", r"-user[= ]['\"]?[^\s'\"]{1,64}:", ("--user",)),
            ),
            anchored=True,
            min_classes=2,
            priority=25,
            check=_basic_check,
            **_ASSIGNED,
            description="HTTP basic credentials (Authorization: Basic …, curl -u user:pass)",
        ),
        Rule(
            "env-secret",
            c(
                r"(?P<kw>KEY|SECRET|TOKEN|PASS|PWD|AUTH|CREDENTIAL)(?P<rest>[A-Z0-9_]{0,60}?)"
                r"=(?:\\?\"(?P<dq>[^\"\n\\]{1,500})\\?\"|'(?P<sq>[^'\n]{1,500})'"
                # Unquoted: up to a space or quote (a Django SECRET_KEY holds '(', '&',
                # '#'), less a shell's trailing ';', '&&', '|' or ')'.
                r"|(?P<uq>[^\s'\"`\\]{0,499}[^\s'\"`\\;&|)])(?=[;&|)]*(?:[\s'\"`\\]|$)))"
            ),
            ("dq", "sq", "uq"),
            keywords=("key", "secret", "token", "pass", "pwd", "auth", "credential"),
            prefilters=_assigned("key", "secret", "token", "pass", "pwd", "auth", "credential"),
            anchored=True,
            min_length=6,
            priority=30,
            check=_env_check,
            **_ASSIGNED,
            description="KEY=value lines (.env files, export, docker -e) whose KEY names a secret",
        ),
        Rule(
            "env-secret",  # the same kind, written as a name/value pair (Kubernetes env, CI variables)
            c(
                r"(?ai:name)"
                + _Q
                + r"\s{0,4}[:=]\s{0,4}"
                + _Q
                + r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,80})"
                + _Q
                + r"\s{0,4},?\s{0,40}"
                + _Q
                + r"(?ai:value)"
                + _Q
                + r"\s{0,4}[:=]\s{0,4}"
                + _VALUE
            ),
            ("qv", "uv"),
            keywords=("name",),
            prefilters=(
                Prefilter(
                    "m",
                    "e(?<=name)" + _PF_Q + r"\s{0,4}[:=]\s{0,4}" + _PF_Q + r"[a-z_][a-z0-9_.\-]{0,80}" + _PF_Q
                    + r"\s{0,4},?\s{0,40}" + _PF_Q + "value" + _PF_Q + r"\s{0,4}[:=]",
                    at=2,
                ),
            ),
            anchored=True,
            min_length=6,
            priority=30,
            check=_pair_check,
            **_ASSIGNED,
            description="name/value pairs whose name names a secret (- name: API_TOKEN / value: …)",
        ),
        Rule(
            "password",
            _assignment_regex(r"pass|pwd"),
            ("qv", "uv"),
            keywords=("pass", "pwd"),
            prefilters=_assigned("pass", "pwd"),
            anchored=True,
            entropy=2.5,
            min_length=8,
            min_classes=2,
            priority=40,
            check=_assignment_check("password"),
            **_ASSIGNED,
            description='password assignments (password: "…", --password=…), entropy-gated',
        ),
        Rule(
            "generic-secret",
            _assignment_regex(r"secret|token|key|auth|credential"),
            ("qv", "uv"),
            keywords=("secret", "token", "key", "auth", "credential"),
            prefilters=_assigned("secret", "token", "key", "auth", "credential"),
            anchored=True,
            entropy=3.0,
            min_length=10,
            min_classes=2,
            priority=40,
            check=_assignment_check("generic-secret"),
            **_ASSIGNED,
            description='secret, token and API-key assignments ("api_key": "…", token = \'…\'), entropy-gated',
        ),
    ]


BUILTIN_RULES: tuple[Rule, ...] = tuple(_builtin_rules())
BUILTIN_NAMES = frozenset(r.name for r in BUILTIN_RULES)
MIN_TEXT = 8  # no built-in rule finds a secret in fewer characters


def keyed_value_ok(kind: str, value: str) -> bool:
    """Whether a whole string stored under a key that names a secret passes the tests
    of ``kind`` (from :func:`key_kind` or :func:`pair_kind`): what the ``password``,
    ``generic-secret`` or ``env-secret`` rule asks of a value, the syntax aside."""
    if len(value) > 1000 or PLACEHOLDER_PREFIX in value:
        return False
    if kind == "env-secret":
        return len(value) >= 6 and not (value.isdigit() and len(value) < 12) and not _placeholder_value(value)
    gate = _KEYED_GATES[kind]
    if len(value) < gate.min_length or any(c.isspace() for c in value):
        return False
    if _classes(value) < gate.min_classes or shannon_entropy(value) < (gate.entropy or 0.0):
        return False
    return not _placeholder_value(value)


_KEYED_GATES = {r.name: r for r in BUILTIN_RULES if r.name in ("password", "generic-secret")}


def pair_kind(d: dict) -> str | None:
    """``"env-secret"`` for ``{"name": "API_TOKEN", "value": "…"}`` (Kubernetes env, CI
    variables), whose ``value`` is a secret because of its name."""
    if "value" not in d:
        return None
    name = d.get("name", d.get("key"))
    return "env-secret" if isinstance(name, str) and key_kind(name, env=True) else None
