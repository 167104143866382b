"""The fast secret search finds exactly what the plain one finds.

:class:`opalgit.secrets.redact.Rules` does not try every rule wherever one of its keywords
occurs: each built-in rule declares :class:`~opalgit.secrets.rules.Prefilter`
conditions, a few regex searches over all strings of a record say which rules can
match in which string and where, and long strings are remembered once scanned.
Everything here compares that against :func:`reference_find`, the search as it was
before (every rule whose keyword occurs, tried at every occurrence), on the secret
corpus, the session fixtures and generated text that mixes real-looking secrets,
near misses, placeholders and awkward Unicode. Results must be identical: the same
spans, the same kinds, the same placeholders.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import time
from typing import Any, Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit.secrets.redact import Redactor, Rules
from opalgit.secrets.rules import BUILTIN_RULES, PLACEHOLDER_PREFIX, PLACEHOLDER_RE

from ..conftest import FIXTURES, fixture_lines

KEY = bytes(range(32))
with open(os.path.join(FIXTURES, "secrets", "corpus.json"), encoding="utf-8") as _fh:
    CORPUS = json.load(_fh)
CONTEXTS = [e["context"] for e in CORPUS["secrets"] if e["context"]]
MISSES = [m["text"] for m in CORPUS["near_misses"]]


def _recall():
    import importlib.util

    spec = importlib.util.spec_from_file_location("recall", os.path.join(FIXTURES, "secrets", "recall.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The kinds and forms added for issue 17 (tests/fixtures/secrets/recall.py).
CONTEXTS += [e["context"] for e in _recall().planted()] + [e["context"] for e in _recall().escaped_source_lines()]
MISSES += list(_recall().NEAR_MISSES)
USER_RULES = r"""
disable = ["jwt"]

[[rule]]
name = "acme-token"
regex = 'acme_(?:live|test)_[0-9a-f]{32}'
keywords = ["acme_"]

[[rule]]
name = "internal-password"
regex = 'svc-pass\s*=\s*(?P<pw>\S+)'
group = "pw"
entropy = 3.0
min_length = 8

[[rule]]
name = "no-keywords"
regex = 'zz[0-9]{8}zz'

[allow]
values = ["sk-proj-0000testfixture0000aB3dE5gH7jK9mN1pQ3s"]
regexes = ['^AKIA[A-Z0-9]{12}TEST$']
"""


# ------------------------------------------------------------------ the reference


_NEEDLES: dict[int, tuple[Rules, list, dict]] = {}


def _needles(rules: Rules) -> tuple[list, dict]:
    cached = _NEEDLES.get(id(rules))
    if cached is not None and cached[0] is rules:
        return cached[1], cached[2]
    lowered = [(r, tuple(k.lower() for k in r.keywords)) for r in rules.rules]
    always = [(i, r, ()) for i, (r, ks) in enumerate(lowered) if not ks]
    words = {k for _, ks in lowered for k in ks}
    needles = sorted(w for w in words if not any(o != w and o in w for o in words))
    by_needle: dict[str, list] = {n: [] for n in needles}
    for i, (r, ks) in enumerate(lowered):
        for n in needles:
            if any(n in k for k in ks):
                by_needle[n].append((i, r, ks))
    _NEEDLES[id(rules)] = (rules, always, by_needle)
    return always, by_needle


def _masked(text: str) -> tuple[str, str, list[tuple[int, int]]]:
    low, masked, spans = text.lower(), text, []
    if PLACEHOLDER_PREFIX in text:
        spans = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
        if spans:
            parts, pos = [], 0
            for a, b in spans:
                parts += [text[pos:a], "\0" * (b - a)]
                pos = b
            parts.append(text[pos:])
            masked = "".join(parts)
            low = masked.lower()
    if len(low) != len(masked):
        low = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in masked)
    return masked, low, spans


def _positions(low: str, word: str) -> list[int]:
    out, at = [], low.find(word)
    while at != -1:
        out.append(at)
        at = low.find(word, at + 1)
    return out


def _candidates(rules: Rules, rule: Any, words: Iterable[str], masked: str, low: str, spans: list) -> list:
    """One rule's accepted matches, tried the plain way (the loop of the old find)."""
    if rule.anchored:
        starts = sorted({p - rule.back for w in words for p in _positions(low, w) if p >= rule.back})
        matches: Iterable[Any] = (rule.regex.match(masked, p) for p in starts)
    elif words and not any(_positions(low, w) for w in words):
        return []
    else:
        matches = rule.regex.finditer(masked)
    out, reach = [], -1
    for m in matches:
        if m is None or m.start() < reach:
            continue
        a, b = rule.span(m)
        if a < 0 or b <= a or not rule.accepts(masked, m, a, b):
            continue
        if spans and "\0" in masked[a:b] and any(x < b and a < y for x, y in spans):
            continue
        if (rules.allow_values or rules.allow_regexes) and rules.allowed(masked[a:b]):
            continue
        reach = m.end()
        out.append((rule.priority, a, a - b, rule.name))
    return out


_PLAIN_ESCAPES = {"/": "/", "\\": "\\", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = set("0123456789abcdefABCDEF")


def _plain_unescape(text: str) -> tuple[str, list[int], list[int]]:
    """JSON escapes decoded one character at a time, with where each decoded
    character starts and ends in ``text``."""
    out, starts, ends, i = [], [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            c = text[i + 1]
            if c == "u" and len(text) >= i + 6 and set(text[i + 2 : i + 6]) <= _HEX4:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                starts.append(i)
                ends.append(i + 6)
                i += 6
                continue
            if c in _PLAIN_ESCAPES:
                out.append(_PLAIN_ESCAPES[c])
                starts.append(i)
                ends.append(i + 2)
                i += 2
                continue
        out.append(text[i])
        starts.append(i)
        ends.append(i + 1)
        i += 1
    return "".join(out), starts, ends


_PLAIN_B64 = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{32,}={0,2}(?:(?:\r?\n|\\r\\n|\\n)[A-Za-z0-9+/]{4,}={0,2})*")


def _plain_base64_texts(text: str, wide: bool = False) -> list[tuple[int, int, str]]:
    """Runs of base64 (wrapped lines joined), decoded where they decode to UTF-8 text
    without control characters: every run of a text that says base64 (or when
    ``wide``); a one-word text only when it is base64 as a whole."""
    if len(text) < 32:
        return []
    if wide or "base64" in text.lower():
        runs = [(m.start(), m.end(), m.group(0)) for m in _PLAIN_B64.finditer(text)]
    elif " " in text or "\t" in text or len(text) > 2 << 16:
        return []
    else:
        stripped = text.strip()
        at = text.index(stripped) if stripped else 0
        runs = [(at, at + len(stripped), stripped)] if _PLAIN_B64.fullmatch(stripped) else []
    out = []
    for a, b, run in runs:
        if len(run) > 1 << 16 or run.islower() or run.isupper():
            continue
        data = re.sub(r"\\r|\\n|\r|\n", "", run).rstrip("=")
        if len(data) % 4 == 1:
            data = data[:-1]
        try:
            raw = base64.b64decode(data + "=" * (-len(data) % 4))
            decoded = raw.decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        if not any(b_ < 32 and b_ not in (9, 10, 13) or b_ == 127 for b_ in raw):
            out.append((a, b, decoded))
    return out


def reference_find(rules: Rules, text: str, depth: int = 0, wide: bool = False) -> list[tuple[int, int, str]]:
    """The search before prefilters: every rule one of whose keywords occurs in the
    text, tried at every occurrence of its keywords (or over the whole text); and
    the same on the text with its JSON escapes decoded, two levels deep."""
    if len(text) < rules.min_text:
        return []
    always, by_needle = _needles(rules)
    low0 = text.encode("utf-8", "surrogatepass").lower()
    present = [n for n in by_needle if n.encode("utf-8", "surrogatepass") in low0]
    escaped = depth < 2 and "\\u" in text or depth < 2 and "\\/" in text
    masked, low, spans = _masked(text)
    b64 = _plain_base64_texts(masked, wide) if depth == 0 else []
    if not present and not always and not escaped and not b64:
        return []
    active = {i: (r, ks) for n in present for i, r, ks in by_needle[n]}
    active.update({i: (r, ks) for i, r, ks in always})
    cands = []
    for i in sorted(active):
        rule, words = active[i]
        cands += _candidates(rules, rule, words, masked, low, spans)
    if escaped:
        decoded, starts, ends = _plain_unescape(masked)
        if decoded != masked:
            for a, b, kind in reference_find(rules, decoded, depth + 1):
                cands.append((60, starts[a], starts[a] - ends[b - 1], kind))
    for a, b, decoded in b64:
        inner = reference_find(rules, decoded, 1)
        if inner:
            cands.append((70, a, a - b, inner[0][2] + "-base64"))
    cands.sort()
    chosen: list[tuple[int, int, str]] = []
    for _, a, neg, kind in cands:
        b = a - neg
        if all(b <= x or y <= a for x, y, _ in chosen):
            chosen.append((a, b, kind))
    chosen.sort()
    return chosen


class ReferenceRules(Rules):
    """Rules that search the plain way, with no prefilter and no memory."""

    def suspects(self, texts):
        return {i: True for i, t in enumerate(texts) if len(t) >= self.min_text}

    def find(self, text, present=None, _depth=0, *, wide=False):
        return reference_find(self, text, _depth, wide)


# ------------------------------------------------------------------- the material

_SESSION_STRINGS: list[str] = []


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(k)
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def session_records() -> list[Any]:
    return [value for _raw, value in fixture_lines()]


def session_strings() -> list[str]:
    if not _SESSION_STRINGS:
        seen: dict[str, None] = {}
        out: list[str] = []
        for rec in session_records():
            _strings(rec, out)
        for s in out:
            seen.setdefault(s)
        _SESSION_STRINGS.extend(seen)
    return _SESSION_STRINGS


ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# Keywords, prefixes and the characters around them: what the rules and prefilters look at.
FRAGMENTS = [
    "key", "KEY", "Key", "api_key", "API_KEY=", "apiKey", "token", "TOKEN", "_TOKEN=", "secret", "SECRET",
    "client_secret", "aws_secret_access_key", "SecretAccessKey", "credential", "CREDENTIALS", "auth", "AUTH_",
    "authorization: basic ", "Authorization: Bearer ", "bearer ", "pass", "PASS", "password", "passwd", "pwd", "PWD=",
    "--password ", "--token ", "--api-key=", "-u ", "curl -u ", "--user=", "--user ", "name", "name: ", '"name": "',
    "value", "value: ", '"value": "', "://", "https://", "postgres://app:", "@", "@db:5432", "ghp_", "gho_", "ghs_",
    "github_pat_", "glpat-", "gldt-", "xoxb-", "xapp-1-", "hooks.slack.com/services/T", "/B", "sk_live_", "rk_test_",
    "whsec_", "sk-", "sk-ant-", "sk-proj-", "hf_", "npm_", "eyJ", ".eyJ", "AKIA", "ASIA", "A3T", "AIza", "AccountKey=",
    "SharedAccessKey=", "?sv=2022&sig=", "&sig=", "8Q~", "Q~", "-----BEGIN RSA PRIVATE KEY-----\n",
    "-----END RSA PRIVATE KEY-----", "-----BEGIN ", "PRIVATE KEY", "opal-secret:github-token:0123456789ab",
    "opal-secret:", "export ", "=", ":", " = ", ": ", "=>", ":=", '"', "'", "`", "\\", '\\"', "\\n", "\n", " ", "\t",
    "]", "[", "{", "}", "(", ")", ",", ";", "&", "?", "#", "-", "_", ".", "/", "+", "%3D", "$", "${API_KEY}",
    "changeme", "EXAMPLE", "xxxxxxxx", "İ", "K", "ß", "ς", "Σ", "\u2003", "\x1c", "\x85", "\xa0", "\u00e9", "😀",
]


def _random_token(rng: random.Random) -> str:
    return "".join(rng.choice(ALNUM) for _ in range(rng.choice([6, 10, 16, 20, 24, 30, 32, 36, 40, 44, 60, 90])))


def generated_texts(n: int, seed: int) -> list[str]:
    """Texts glued from fragments, random tokens, corpus contexts and near misses."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 14)):
            kind = rng.random()
            if kind < 0.45:
                parts.append(rng.choice(FRAGMENTS))
            elif kind < 0.75:
                parts.append(_random_token(rng))
            elif kind < 0.85:
                parts.append(rng.choice(CONTEXTS + KEYWORD_EXAMPLES))
            elif kind < 0.92:
                parts.append(rng.choice(MISSES))
            else:
                parts.append(" " * rng.randint(1, 5))
        text = "".join(parts)
        if rng.random() < 0.3:  # flip the case of some letters
            text = "".join(c.swapcase() if rng.random() < 0.2 else c for c in text)
        texts.append(text)
    return texts


def mutated_contexts(seed: int) -> list[str]:
    """Each corpus context with a character dropped, doubled or changed here and there."""
    rng = random.Random(seed)
    out = []
    for text in CONTEXTS + MISSES:
        for _ in range(6):
            chars = list(text)
            for _ in range(rng.randint(1, 4)):
                if not chars:
                    break
                i = rng.randrange(len(chars))
                op = rng.random()
                if op < 0.3:
                    del chars[i]
                elif op < 0.6:
                    chars.insert(i, chars[i])
                else:
                    chars[i] = rng.choice(ALNUM + " =:-_\"'\n")
            out.append("".join(chars))
    return out


# Every keyword of every rule with a secret behind it (the corpus lacks a few).
KEYWORD_EXAMPLES = [
    "id=A3TXQ7ZK2M9WB4VN8RD1 ", "id=ABIAQ7ZK2M9WB4VN8RD1 ", "id=ACCAQ7ZK2M9WB4VN8RD1\n",
    "export GOOGLE_CREDENTIALS=Zq8vT2mN4pL6xR0sW3yB\n", "docker run -e DB_CREDENTIAL='pL6x R0sW3yB5'",
    "curl --user=admin:Zq8vT2mN4pL6 https://x", "curl -u admin:Zq8vT2mN4pL6 https://x",
    "Authorization: Basic YWRtaW46WnE4dlQybU40cEw2", "--api-key Zq8vT2mN4pL6xR0sW3yB",
    "xapp-1-A0123456789-0123456789012-abcdef0123456789", "rk_test_" + "aB3dE5gH7jK9mN1p",
    "whsec_" + "aB3dE5gH7jK9mN1pQ3sT5vW7", "github_pat_" + "aB3dE5gH7jK9mN1pQ3sT5v_W7yZ9",
]

RULE_SETS = {
    "builtin": Rules,
    "user": lambda: Rules.load(USER_RULES),
}


# ----------------------------------------------------------------------- the tests


def _same(rules: Rules, texts: Iterable[str]) -> None:
    for text in texts:
        assert rules.find(text) == reference_find(rules, text), text


@pytest.mark.parametrize("which", sorted(RULE_SETS))
def test_find_equals_the_plain_search_on_the_corpus(which):
    rules = RULE_SETS[which]()
    _same(rules, CONTEXTS + MISSES + KEYWORD_EXAMPLES + ["\n\n".join(CONTEXTS)] + mutated_contexts(1))


@pytest.mark.parametrize("which", sorted(RULE_SETS))
def test_find_equals_the_plain_search_on_the_session_fixtures(which):
    rules = RULE_SETS[which]()
    _same(rules, session_strings())


@pytest.mark.parametrize("which", sorted(RULE_SETS))
def test_find_equals_the_plain_search_on_generated_text(which):
    rules = RULE_SETS[which]()
    _same(rules, generated_texts(3000, seed=7))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(CONTEXTS), st.text(max_size=12),
                          st.text(alphabet=ALNUM, min_size=8, max_size=48)), max_size=10))
def test_find_equals_the_plain_search_hypothesis(pieces):
    text = "".join(pieces)
    rules = Rules()
    assert rules.find(text) == reference_find(rules, text)


def test_the_batch_search_equals_one_text_at_a_time():
    # suspects() searches many strings joined; its answer for each must be the one
    # for the string alone, whatever its neighbours (ASCII or not, lower() changing
    # lengths or not).
    texts = generated_texts(1500, seed=11) + CONTEXTS + MISSES
    rng = random.Random(3)
    for _ in range(40):
        batch = rng.sample(texts, rng.randint(1, 60))
        batched = Rules()
        found = batched.suspects(batch)
        alone = Rules()
        for i, text in enumerate(batch):
            want = reference_find(alone, text)
            got = batched.find(text, found[i]) if i in found else []
            assert got == want, text


def test_every_prefilter_keeps_its_promise():
    # Stronger than equal results: for every rule and every keyword, each match the
    # plain search accepts there is one the prefilters let through (right rule, right
    # keyword, right place). Equal results alone could hide a loss behind an
    # overlapping match of another rule.
    rules = Rules()
    gate = rules._gate
    texts = CONTEXTS + MISSES + KEYWORD_EXAMPLES + mutated_contexts(2) + generated_texts(3000, seed=5)
    texts += session_strings()
    covered: set[tuple[str, str]] = set()
    for text in texts:
        if len(text) < rules.min_text:
            continue
        masked, low, spans = _masked(text)
        wake = gate.scan([text])[0]
        for i, rule in enumerate(rules.rules):
            for word in {k.lower() for k in rule.keywords}:
                cands = _candidates(rules, rule, [word], masked, low, spans)
                if not cands:
                    continue
                covered.add((rule.name, word))
                assert i in wake, (rule.name, word, text)
                words, starts = wake[i]
                assert word in words, (rule.name, word, text)
                if starts is not None:
                    for c in cands:
                        m_start = _match_start(rule, masked, low, word, c)
                        assert m_start in starts, (rule.name, word, text)
    assert covered == {(r.name, k.lower()) for r in BUILTIN_RULES for k in r.keywords}


def _match_start(rule: Any, masked: str, low: str, word: str, cand: tuple) -> int:
    """Where the regex started for an accepted candidate (the keyword's place - back)."""
    _, a, neg, _ = cand
    for p in _positions(low, word):
        s = p - rule.back
        if s < 0:
            continue
        m = rule.regex.match(masked, s)
        if m is not None and rule.span(m) == (a, a - neg):
            return s
    raise AssertionError("no start for a candidate")


def test_every_builtin_rule_is_prefiltered():
    rules = Rules()
    assert {rules.rules[i].name for i in rules._gate.gated} == {r.name for r in BUILTIN_RULES}
    assert rules.needles == ()  # no keyword search left for the built-ins
    assert len(rules._gate.passes) <= 16


def test_redact_value_equals_the_plain_redactor():
    records = session_records()
    records += [{"type": "text", "text": t, "n": i} for i, t in enumerate(generated_texts(600, seed=13))]
    records += [
        {"env": {"ACME_API_KEY": "Zq8vT2mN4pL6xR0sW3yB"}, "name": "PAYMENT_API_TOKEN", "value": "pL6xR0sW3yB5cD7f"}
    ]
    # Long texts seen again and again (remembered), beside strings seen once.
    pool = ["\n".join(generated_texts(30, seed=100 + n)) for n in range(12)]
    records += [{"content": pool[n % 12], "id": f"record {n}", "more": [pool[n * 5 % 12], f"n={n}"]} for n in range(60)]
    for which, make in RULE_SETS.items():
        fast = Redactor(make(), KEY)
        plain_rules = ReferenceRules() if which == "builtin" else _reference_user_rules()
        plain = Redactor(plain_rules, KEY)
        want = [(plain.redact_value(rec), plain.scan_value(rec)) for rec in records]
        for _round in range(2):  # the second round answers from memory
            for rec, (redacted, hits) in zip(records, want):
                assert fast.redact_value(rec) == redacted, (which, rec)
                assert fast.scan_value(rec) == hits, (which, rec)


def _reference_user_rules() -> ReferenceRules:
    loaded = Rules.load(USER_RULES)
    return ReferenceRules(
        loaded.user_rules,
        allow_values=loaded.allow_values,
        allow_regexes=loaded.allow_regexes,
        disable=loaded.disabled,
    )


def test_long_texts_are_searched_once():
    rules = Rules()
    clean = "def handler(key=None, token=None):\n    return key or token\n" * 40
    dirty = clean + "export GITHUB_TOKEN=ghp_" + "aB3dE5gH7jK9" * 3 + "\n"
    assert rules.find(clean) == [] and clean in rules._clean_long
    first = rules.find(dirty)
    assert first and dirty in rules._found_long
    calls = []
    rules._gate.scan = lambda texts: calls.append(texts)  # type: ignore[method-assign]
    assert rules.find(dirty) == first and rules.find(clean) == []
    assert list(rules.suspects([clean, dirty, clean])) == [1]
    assert calls == []


@pytest.mark.parametrize("which", sorted(RULE_SETS))
def test_a_long_text_with_a_secret_is_redacted_every_time(which):
    r = Redactor(RULE_SETS[which](), KEY)
    dirty = "line of code\n" * 60 + "export GITHUB_TOKEN=ghp_" + "aB3dE5gH7jK9" * 3 + "\n"
    first = r.redact_value({"content": dirty, "again": [dirty]})
    assert first[1] and "ghp_" not in json.dumps(first[0])
    for n in range(3):
        assert r.redact_value({"content": dirty, "again": [dirty]}) == first
        # with a string beside it that is searched (then not all are remembered)
        out, found = r.redact_value([dirty, f"a note number {n}"])
        assert out == [first[0]["content"], f"a note number {n}"] and found == first[1]


def test_a_text_forgotten_between_suspects_and_find_is_searched_again():
    rules = Rules()
    dirty = "x = 1\n" * 200 + "export GITHUB_TOKEN=ghp_" + "aB3dE5gH7jK9" * 3 + "\n"
    first = rules.find(dirty)
    present = rules.suspects([dirty])[0]
    rules._found_long.clear()  # the memory was full and was emptied meanwhile
    assert rules.find(dirty, present) == first


def test_speed_against_the_plain_search(capsys):
    """Prints how much faster than the plain search redact_value is on the session
    fixtures plus generated text; asserts nothing about time (the machine may be busy)."""
    records = session_records()
    records += [{"type": "tool_result", "content": t} for t in generated_texts(400, seed=17)]
    timings = {}
    for name, rules in (("fast", Rules()), ("plain", ReferenceRules())):
        r = Redactor(rules, KEY)
        start = time.process_time()
        for rec in records:
            r.redact_value(rec)
        timings[name] = time.process_time() - start
    with capsys.disabled():
        print(f"\nredact_value: {timings['plain'] / max(timings['fast'], 1e-9):.1f}x faster than the plain search")
