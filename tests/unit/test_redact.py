"""Secret redaction (opalgit.secrets.redact, opalgit.secrets.rules) and the local vault (opalgit.secrets.vault).

The corpus in tests/fixtures/secrets/ holds realistic FAKE credentials in the
contexts where agent sessions really meet them, and near misses that must be left
alone; make_corpus.py regenerates it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import stat
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import jsonl
from opalgit.codec import PayloadRef
from opalgit.errors import InputError, OpalError, UsageError
from opalgit.secrets import redact
from opalgit.secrets.redact import (
    PLACEHOLDER_RE,
    Finding,
    Hit,
    Redactor,
    Rules,
    find_placeholders,
    is_placeholder,
    restore_bytes,
    restore_text,
    restore_value,
    scan_text,
    scan_value,
)
from opalgit.secrets.rules import BUILTIN_RULES
from opalgit.secrets.vault import Vault, VaultError, default_path

from ..conftest import FIXTURES, fixture_lines

SECRETS_DIR = os.path.join(FIXTURES, "secrets")
KEY = bytes(range(32))


def _load() -> dict:
    with open(os.path.join(SECRETS_DIR, "corpus.json"), encoding="utf-8") as fh:
        return json.load(fh)


CORPUS = _load()
SECRETS = CORPUS["secrets"]
TEXT_ENTRIES = [e for e in SECRETS if e["context"]]
VALUE_ENTRIES = [e for e in SECRETS if "value" in e]
NEAR_MISSES = CORPUS["near_misses"]


def _parts(secret: str) -> list[str]:
    """What must not survive redaction: the secret, line by line (a key block's lines
    are joined by real newlines, or by backslash-n inside JSON text)."""
    return [p for p in re.split(r"\n|\\n", secret) if p]


def _leaks(text: str, secrets: list[str]) -> list[str]:
    return [p for s in secrets for p in _parts(s) if p in text]


ALL_SECRETS = [e["secret"] for e in SECRETS]


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(key=KEY)


# ---------------------------------------------------------------------- the corpus


def test_corpus_is_large_and_covers_every_builtin_rule():
    kinds = {e["kind"] for e in SECRETS}
    assert len(SECRETS) >= 60
    assert len(NEAR_MISSES) >= 30
    # every built-in rule has corpus entries, except the one a JSON key triggers alone
    # (the kinds added for issue 17 are planted by tests/fixtures/secrets/recall.py)
    recall = importlib.util.spec_from_file_location("recall", os.path.join(SECRETS_DIR, "recall.py"))
    module = importlib.util.module_from_spec(recall)
    recall.loader.exec_module(module)
    assert {r.name for r in BUILTIN_RULES} <= kinds | {e["kind"] for e in module.planted()}


def test_corpus_file_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(SECRETS_DIR, "make_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus_json, session = module.build()
    with open(os.path.join(SECRETS_DIR, "corpus.json"), encoding="utf-8") as fh:
        assert fh.read() == corpus_json, "run: python tests/fixtures/secrets/make_corpus.py"
    with open(os.path.join(SECRETS_DIR, "session.jsonl"), encoding="utf-8") as fh:
        assert fh.read() == session, "run: python tests/fixtures/secrets/make_corpus.py"


@pytest.mark.parametrize("entry", TEXT_ENTRIES, ids=lambda e: e["kind"])
def test_every_corpus_secret_is_found_and_replaced(redactor, entry):
    out, findings = redactor.redact_text(entry["context"])
    assert entry["kind"] in [f.kind for f in findings]
    assert not _leaks(out, [entry["secret"]])
    for f in findings:
        assert f.placeholder in out and is_placeholder(f.placeholder)
        assert f.placeholder == redactor.placeholder(f.kind, f.secret)
    # only the values go: the text around them is kept as it was
    around = entry["context"]
    for f in findings:
        around = around.replace(f.secret, "")
    assert PLACEHOLDER_RE.sub("", out) == around


@pytest.mark.parametrize("entry", VALUE_ENTRIES, ids=lambda e: e["kind"])
def test_a_key_that_names_a_secret_marks_its_value(redactor, entry):
    value = entry["value"]
    out, findings = redactor.redact_value(value)
    assert entry["kind"] in [f.kind for f in findings]
    assert not _leaks(json.dumps(out), [entry["secret"]])
    assert restore_value(out, {f.placeholder: f.secret for f in findings}) == value


@pytest.mark.parametrize("miss", NEAR_MISSES, ids=lambda m: m["why"])
def test_near_misses_are_left_alone(redactor, miss):
    out, findings = redactor.redact_text(miss["text"])
    assert findings == [] and out is miss["text"]
    assert scan_text(miss["text"]) == []


def test_near_misses_inside_values_are_left_alone(redactor):
    value = {"records": [{"type": "text", "text": m["text"], "why": m["why"]} for m in NEAR_MISSES]}
    out, findings = redactor.redact_value(value)
    assert findings == [] and out is value


def test_whole_corpus_in_one_text(redactor):
    text = "\n\n".join(e["context"] for e in TEXT_ENTRIES)
    out, findings = redactor.redact_text(text)
    assert _leaks(out, [e["secret"] for e in TEXT_ENTRIES]) == []
    assert {e["kind"] for e in TEXT_ENTRIES} <= {f.kind for f in findings}
    assert restore_text(out, {f.placeholder: f.secret for f in findings}) == text


# -------------------------------------------------------------------- placeholders


def test_placeholders_are_stable_across_calls_contexts_and_redactors(redactor):
    token = next(e["secret"] for e in SECRETS if e["kind"] == "github-token")
    a, fa = redactor.redact_text(f"export GITHUB_TOKEN={token}")
    b, fb = Redactor(key=KEY).redact_value({"cmd": f"git clone https://{token}@github.com/a/b", "n": 1})
    assert fa[0].placeholder == fb[0].placeholder
    assert fa[0].placeholder in a and fb[0].placeholder in b["cmd"]
    other = Redactor(key=bytes(32)).placeholder("github-token", token)
    assert other != fa[0].placeholder  # keyed: without the repository's key nothing matches


def test_same_secret_in_two_rules_shares_the_hash(redactor):
    pw = "Zq8vT2mN4pL6xR0s"
    out, findings = redactor.redact_text(f"postgres://app:{pw}@db/x\nDB_PASSWORD={pw}\n")
    kinds = sorted(f.kind for f in findings)
    assert kinds == ["env-secret", "url-password"]
    assert len({f.placeholder.rsplit(":", 1)[1] for f in findings}) == 1


def test_placeholder_is_plain_ascii_safe_in_json_shell_and_urls(redactor):
    for entry in SECRETS:
        ph = redactor.placeholder(entry["kind"], entry["secret"])
        assert ph.isascii() and re.fullmatch(r"[a-z0-9:-]+", ph)
        assert json.dumps(ph) == f'"{ph}"'
        assert shlex.quote(ph) == ph
        assert PLACEHOLDER_RE.fullmatch(ph) and find_placeholders(f"x{ph}y") == [ph]
    assert "secret" not in redactor.placeholder("jwt", "s3cret").split(":")[-1]


def test_placeholders_never_match_a_rule(redactor):
    for rule in BUILTIN_RULES:
        ph = redactor.placeholder(rule.name, "Zq8vT2mN4pL6xR0sW3yB5cD7")
        for shape in (
            ph,
            f"{rule.name.upper().replace('-', '_')}={ph}",
            f'password: "{ph}"',
            f"api_key = '{ph}'",
            f"postgres://app:{ph}@db:5432/x",
            f"Authorization: Bearer {ph}",
            f"-----BEGIN RSA PRIVATE KEY-----\n{ph}\n-----END RSA PRIVATE KEY-----",
        ):
            assert scan_text(shape) == [], (rule.name, shape)
            assert redactor.redact_text(shape) == (shape, [])


def test_finding_and_hit_never_show_the_secret(redactor):
    secret = next(e["secret"] for e in SECRETS if e["kind"] == "openai-key")
    _, findings = redactor.redact_text(f"key {secret}")
    assert secret not in repr(findings)
    hits = redactor.scan_text(f"key {secret}")
    assert hits and secret not in repr(hits)
    assert not hasattr(hits[0], "secret")


# ---------------------------------------------------------------------- idempotence


@pytest.mark.parametrize("entry", TEXT_ENTRIES, ids=lambda e: e["kind"])
def test_redacting_twice_changes_nothing(redactor, entry):
    once, _ = redactor.redact_text(entry["context"])
    twice, findings = redactor.redact_text(once)
    assert twice == once and findings == []
    assert redactor.scan_text(once) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_redact_text_never_raises_and_is_idempotent(text):
    r = Redactor(key=KEY)
    once, findings = r.redact_text(text)
    twice, again = r.redact_text(once)
    assert twice == once and again == []
    assert restore_text(once, {f.placeholder: f.secret for f in findings}) == text


_pieces = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
    st.sampled_from([e["context"] for e in TEXT_ENTRIES]),
    st.sampled_from(["API_KEY=", "password: ", "token=", "://u:", "Bearer ", "-----BEGIN ", "opal-secret:x:", "\\n"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_pieces, max_size=6))
def test_glued_fragments_are_idempotent(pieces):
    # Fragments glued without separators: rule matches that overlap, half-quoted
    # values, placeholders next to secrets. Redaction must still settle in one call.
    text = "".join(pieces)
    r = Redactor(key=KEY)
    once, findings = r.redact_text(text)
    assert r.redact_text(once) == (once, [])
    assert restore_text(once, {f.placeholder: f.secret for f in findings}) == text


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_redact_bytes_never_raises_and_round_trips(data):
    r = Redactor(key=KEY)
    out, findings = r.redact_bytes(data)
    assert isinstance(out, bytes)
    assert r.redact_bytes(out) == (out, [])
    assert restore_bytes(out, {f.placeholder: f.secret for f in findings}) == data


def test_redact_bytes_keeps_non_utf8_bytes(redactor):
    token = next(e["secret"] for e in SECRETS if e["kind"] == "npm-token").encode()
    data = b"\xff\xfe junk \xc3 NPM_TOKEN=" + token + b" \x80\n"
    out, findings = redactor.redact_bytes(data)
    assert token not in out and out.startswith(b"\xff\xfe junk \xc3 NPM_TOKEN=opal-secret:npm-token:")
    assert restore_bytes(out, {f.placeholder: f.secret for f in findings}) == data


# ------------------------------------------------------------------ JSON values


def test_redact_value_keeps_structure_order_and_other_types(redactor):
    token = next(e["secret"] for e in SECRETS if e["kind"] == "slack-token")
    ref = PayloadRef(b"\x01" * 32)
    value = {
        "z": 1,
        "a": [True, None, 2.5, {"cmd": f"curl -d token={token} https://slack.com/api/chat.postMessage"}],
        "m": ref,
        "b": b"raw bytes",
        "t": ("tuple", f"SLACK_TOKEN={token}"),
    }
    out, findings = redactor.redact_value(value)
    assert list(out) == ["z", "a", "m", "b", "t"]
    assert out["z"] == 1 and out["a"][:3] == [True, None, 2.5]
    assert out["m"] is ref and out["b"] == b"raw bytes"
    assert isinstance(out["t"], tuple) and out["t"][0] == "tuple"
    assert token not in json.dumps(out, default=repr)
    assert [f.kind for f in findings] == ["slack-token"]  # one finding per placeholder
    assert restore_value(out, {f.placeholder: f.secret for f in findings}) == value
    assert value["a"][3]["cmd"].count(token) == 1  # the input is not modified


def test_redact_value_returns_the_same_object_when_clean(redactor):
    with open(os.path.join(FIXTURES, "claude", "generated", "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl")) as fh:
        records = [json.loads(line) for line in fh]
    for rec in records:
        out, findings = redactor.redact_value(rec)
        assert out is rec and findings == []


def test_secrets_in_dict_keys_are_redacted(redactor):
    token = next(e["secret"] for e in SECRETS if e["kind"] == "github-token")
    value = {token: {"scopes": ["repo"]}, "other": 1}
    out, findings = redactor.redact_value(value)
    assert token not in json.dumps(out) and list(out)[1] == "other"
    assert restore_value(out, {f.placeholder: f.secret for f in findings}) == value
    hits = redactor.scan_value(value)
    assert [(h.kind, h.in_key, h.path) for h in hits] == [("github-token", True, (token,))]


def test_session_file_round_trip_and_nothing_left(redactor):
    """Every record of the corpus session: no secret survives, restore is byte-exact."""
    with open(os.path.join(SECRETS_DIR, "session.jsonl"), "rb") as fh:
        lines = fh.read().splitlines()
    vault: dict[str, str] = {}
    redacted = []
    for raw in lines:
        out, findings = redactor.redact_value(json.loads(raw))
        vault.update({f.placeholder: f.secret for f in findings})
        redacted.append(jsonl.dumps(out))
    blob = b"\n".join(redacted).decode()
    assert _leaks(blob, ALL_SECRETS) == []
    assert len(vault) >= len({e["secret"] for e in SECRETS}) - 2  # a few secrets repeat a shape
    assert [jsonl.dumps(restore_value(json.loads(r), vault)) for r in redacted] == lines
    assert all(not redactor.scan_value(json.loads(r)) for r in redacted)


_keys = st.one_of(st.text(max_size=8), st.sampled_from(["password", "api_key", "value", "name", "token", "env"]))
_leaf_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(ALL_SECRETS[:8] + [e["context"] for e in TEXT_ENTRIES]),
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _leaf_text,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_keys, kids, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_redact_value_round_trips_and_is_idempotent(value):
    r = Redactor(key=KEY)
    out, findings = r.redact_value(value)
    mapping = {f.placeholder: f.secret for f in findings}
    assert restore_value(out, mapping) == value
    assert r.redact_value(out) == (out, [])
    embedded = [e["secret"] for e in TEXT_ENTRIES if e["context"] in json.dumps(value)]
    assert _leaks(json.dumps(out), embedded) == []


def _same_results(batch, single):
    assert len(batch) == len(single)
    for (a, fa), (b, fb) in zip(batch, single):
        assert a == b and (a is not None) == (b is not None)
        assert [(f.kind, f.placeholder, f.secret) for f in fa] == [(f.kind, f.placeholder, f.secret) for f in fb]


def test_redact_values_is_redact_value_of_each():
    """A batch (the redaction worker's) gives each value what it alone would get: the
    corpus session's records, every entry of the corpus in a record of its own, and
    texts cut so that a URL ends one string and an address begins the next (the
    prefilter searches them joined)."""
    with open(os.path.join(SECRETS_DIR, "session.jsonl"), "rb") as fh:
        values = [json.loads(raw) for raw in fh.read().splitlines()]
    values += [{"text": e["context"]} for e in TEXT_ENTRIES] + [e["value"] for e in VALUE_ENTRIES]
    values += [{"a": "see https://"}, {"b": "user:hunter2@example.com done"}, ["clean", "text"], "bare", {}, []]
    values += [{"text": m["text"]} for m in NEAR_MISSES if "text" in m]
    single = [Redactor(key=KEY).redact_value(v) for v in values]
    for size in (1, 7, 32, len(values)):
        r = Redactor(key=KEY)
        batch = [res for i in range(0, len(values), size) for res in r.redact_values(values[i : i + size])]
        _same_results(batch, single)
    # Clean values come back as the very same objects, as from redact_value.
    clean = [{"text": "nothing here"}, ["a", {"b": "c"}]]
    assert all(out is v for v, (out, found) in zip(clean, Redactor(key=KEY).redact_values(clean)))
    assert Redactor(key=KEY).redact_values([]) == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_json, max_size=8))
def test_redact_values_agrees_with_redact_value(values):
    _same_results(Redactor(key=KEY).redact_values(values), [Redactor(key=KEY).redact_value(v) for v in values])


# --------------------------------------------------------------------------- restore


def test_restore_leaves_unknown_placeholders_and_takes_a_callable(redactor):
    out, findings = redactor.redact_text("DB_PASSWORD=Zq8vT2mN4pL6xR0s and opal-secret:jwt:0123456789ab")
    assert restore_text(out, {}) == out
    back = restore_text(out, lambda ph: {f.placeholder: f.secret for f in findings}.get(ph))
    assert back == "DB_PASSWORD=Zq8vT2mN4pL6xR0s and opal-secret:jwt:0123456789ab"
    assert redact.placeholders_in_value({"a": [out]}) == [findings[0].placeholder, "opal-secret:jwt:0123456789ab"]


# ---------------------------------------------------------------------------- scans


def test_scan_reports_kind_and_position_only():
    entry = next(e for e in TEXT_ENTRIES if e["kind"] == "url-password")
    hits = scan_text(entry["context"])
    assert [h.kind for h in hits] == ["url-password"]
    h = hits[0]
    assert entry["context"][h.start : h.end] == entry["secret"] and h.placeholder is None
    keyed = Redactor(key=KEY).scan_text(entry["context"])
    assert keyed[0].placeholder == Redactor(key=KEY).placeholder("url-password", entry["secret"])


def test_scan_value_names_the_path():
    value = VALUE_ENTRIES[0]["value"]
    hits = scan_value({"turns": [{"n": 1}, value]})
    assert [(h.kind, h.path) for h in hits] == [
        ("generic-secret", ("turns", 1, "mcpServers", "acme", "env", "ACME_API_KEY"))
    ]
    assert isinstance(hits[0], Hit)


def test_scan_ignores_placeholders_but_sees_a_secret_committed_before_its_rule(redactor):
    token = "acme_live_0123456789abcdef0123456789abcdef"
    text = f"ACME={token} GITHUB=opal-secret:github-token:0123456789ab"
    assert scan_text(text) == []
    rules = Rules.load('[[rule]]\nname = "acme-token"\nregex = \'acme_live_[0-9a-f]{32}\'\nkeywords = ["acme_live_"]\n')
    assert [h.kind for h in scan_text(text, rules)] == ["acme-token"]


def test_redactor_without_a_key_scans_but_does_not_redact():
    with pytest.raises(UsageError):
        Redactor().redact_text("export GITHUB_TOKEN=ghp_" + "aB3d" * 9)
    with pytest.raises(UsageError):
        Redactor(key=b"short")


# ------------------------------------------------------------------- the rules file

RULES_TOML = r"""
version = 1
disable = ["jwt"]

[[rule]]
name = "acme-token"
regex = 'acme_(?:live|test)_[0-9a-f]{32}'
keywords = ["acme_"]
description = "ACME Corp API tokens"

[[rule]]
name = "internal-password"
regex = 'svc-pass\s*=\s*(?P<pw>\S+)'
group = "pw"
entropy = 3.0
min_length = 8

[allow]
values = ["sk-proj-0000testfixture0000aB3dE5gH7jK9mN1pQ3s"]
regexes = ['^AKIA[A-Z0-9]{12}TEST$']
"""


def test_user_rules_allow_lists_and_disabled_rules():
    rules = Rules.load(RULES_TOML, source=".opal/secrets.toml")
    r = Redactor(rules, KEY)
    acme = "acme_live_" + "0a1b2c3d" * 4
    out, findings = r.redact_text(f"curl -H 'X-Acme: {acme}' https://acme.dev")
    assert [f.kind for f in findings] == ["acme-token"] and acme not in out
    # group: only the value goes; entropy: a weak value is no secret
    out, findings = r.redact_text("svc-pass = Xk9mP2qLw7Rt\nsvc-pass = aaaaaaaab")
    assert out == "svc-pass = " + findings[0].placeholder + "\nsvc-pass = aaaaaaaab"
    # allow-list by value and by regex
    allowed = "OPENAI_API_KEY=sk-proj-0000testfixture0000aB3dE5gH7jK9mN1pQ3s\nid=AKIAABCDEFGHIJKLTEST"
    assert r.redact_text(allowed) == (allowed, [])
    assert Redactor(key=KEY).redact_text(allowed)[1] != []
    # a disabled built-in rule
    jwt = next(e["secret"] for e in SECRETS if e["kind"] == "jwt")
    assert r.scan_text(f"id_token {jwt}") == []
    assert "jwt" not in rules.names() and "acme-token" in rules.names()


def test_rules_files_layer_and_a_shared_file_may_only_add():
    private = Rules.load('[allow]\nvalues = ["Zq8vT2mN4pL6xR0s"]\n')
    both = private.extend('[[rule]]\nname = "acme-token"\nregex = "acme_[0-9a-f]{8}"\n', additive_only=True)
    assert both.allowed("Zq8vT2mN4pL6xR0s") and "acme-token" in both.names()
    assert [h.kind for h in scan_text("see acme_0a1b2c3d", both)] == ["acme-token"]
    with pytest.raises(InputError, match="may only add"):
        Rules.load('disable = ["jwt"]', additive_only=True)
    with pytest.raises(InputError, match="may only add"):
        Rules.load('[allow]\nvalues = ["x"]', additive_only=True)


def test_user_rule_without_keywords_runs_on_every_text():
    rules = Rules.load('[[rule]]\nname = "badge"\nregex = "BDG[0-9]{6}"\n')
    r = Redactor(rules, KEY)
    out, findings = r.redact_value({"a": "badge BDG123456", "b": "DB_PASSWORD=Zq8vT2mN4pL6xR0s"})
    assert sorted(f.kind for f in findings) == ["badge", "env-secret"]
    assert "BDG123456" not in json.dumps(out)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[[rule]\nname=1", "not valid TOML"),
        ("colour = 1", "unknown setting 'colour'"),
        ("version = 2", "version 2"),
        ('disable = ["no-such-rule"]', "no built-in rule"),
        ('[[rule]]\nname = "Bad Name"\nregex = "x"', "'name'"),
        ('[[rule]]\nname = "github-token"\nregex = "x"', "already taken"),
        ('[[rule]]\nname = "a"', "'regex' is required"),
        ('[[rule]]\nname = "a"\nregex = "("', "does not compile"),
        ('[[rule]]\nname = "a"\nregex = "(x)"\ngroup = 2', "no group 2"),
        ('[[rule]]\nname = "a"\nregex = "x"\ngroup = "pw"', "no group named 'pw'"),
        ('[[rule]]\nname = "a"\nregex = "x"\nentropy = "high"', "'entropy'"),
        ('[[rule]]\nname = "a"\nregex = "x"\ncolour = 1', "unknown setting 'colour'"),
        ('[allow]\nvalues = "x"', "lists of strings"),
        ("[allow]\nregexes = ['(']", "does not compile"),
    ],
)
def test_rules_file_errors_name_the_file(text, message):
    with pytest.raises(InputError, match=re.escape(message)) as info:
        Rules.load(text, source="/repo/.git/opal/secrets.toml")
    assert str(info.value).startswith("/repo/.git/opal/secrets.toml: ")
    assert info.value.hint


def test_every_builtin_rule_is_documented():
    with open(os.path.join(os.path.dirname(FIXTURES), "..", "docs", "redaction.md"), encoding="utf-8") as fh:
        doc = fh.read()
    for rule in BUILTIN_RULES:
        assert f"| `{rule.name}` |" in doc, rule.name


def test_redact_module_exports_what_it_says():
    for name in redact.__all__:
        assert hasattr(redact, name), name


# ----------------------------------------------------------------------------- vault


def test_vault_is_private_lazy_and_keeps_its_key(tmp_path):
    path = default_path(tmp_path / ".git")
    assert path == str(tmp_path / ".git" / "opal" / "vault" / "secrets.jsonl")
    vault = Vault(path)
    assert vault.lookup("opal-secret:jwt:0123456789ab") is None and vault.mapping() == {}
    assert not os.path.exists(path)  # reading never creates a vault
    old = os.umask(0)
    try:
        key = vault.key()
    finally:
        os.umask(old)
    assert len(key) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert Vault(path).key() == key


def test_vault_put_lookup_mapping(tmp_path):
    vault = Vault(tmp_path / "v" / "secrets.jsonl")
    r = Redactor(key=vault.key())
    text = "\n".join(e["context"] for e in TEXT_ENTRIES)
    out, findings = r.redact_text(text)
    assert vault.put(findings) == len(findings)
    assert vault.put(findings) == 0  # already known
    again = Vault(vault.path)
    assert len(again) == len(findings)
    assert all(again.lookup(f.placeholder) == f.secret for f in findings)
    assert restore_text(out, again.mapping()) == text
    with pytest.raises(VaultError):
        again.put([Finding("jwt", findings[0].placeholder, "a different secret")])
    with pytest.raises(VaultError):
        again.put([Finding("jwt", "not a placeholder", "x")])


def test_vault_refuses_to_be_readable_by_others(tmp_path):
    vault = Vault(tmp_path / "v" / "secrets.jsonl")
    vault.key()
    os.chmod(vault.path, 0o644)
    with pytest.raises(VaultError, match="open to other users") as info:
        Vault(vault.path).mapping()
    assert "chmod 600" in info.value.hint and isinstance(info.value, OpalError)
    os.chmod(vault.path, 0o640)  # group access only: taken back quietly
    Vault(vault.path).mapping()
    assert stat.S_IMODE(os.stat(vault.path).st_mode) == 0o600
    os.chmod(os.path.dirname(vault.path), 0o755)
    Vault(vault.path).mapping()
    assert stat.S_IMODE(os.stat(os.path.dirname(vault.path)).st_mode) == 0o700


def test_vault_refuses_a_symlink_and_a_foreign_file(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("{}\n")
    os.chmod(target, 0o600)
    (tmp_path / "v").mkdir(mode=0o700)
    os.symlink(target, tmp_path / "v" / "secrets.jsonl")
    with pytest.raises(VaultError, match="symbolic link"):
        Vault(tmp_path / "v" / "secrets.jsonl").mapping()
    os.chmod(target, 0o600)
    with pytest.raises(VaultError, match="not an opal secret vault"):
        Vault(target).mapping()


def test_vault_tolerates_a_cut_short_last_line(tmp_path):
    vault = Vault(tmp_path / "v" / "secrets.jsonl")
    r = Redactor(key=vault.key())
    _, first = r.redact_text("DB_PASSWORD=Zq8vT2mN4pL6xR0s")
    vault.put(first)
    with open(vault.path, "ab") as fh:
        fh.write(b'{"p":"opal-secret:jwt:0123456789ab","s":"eyJhbGci')  # a crash mid-write
    reader = Vault(vault.path)
    assert reader.mapping() == {first[0].placeholder: "Zq8vT2mN4pL6xR0s"}
    _, second = r.redact_text("SESSION_SECRET=pL6xR0sW3yB5cD7f")
    assert reader.put(second) == 1
    fresh = Vault(vault.path)
    assert len(fresh) == 2 and fresh.skipped == 1
    assert fresh.lookup("opal-secret:jwt:0123456789ab") is None


def test_vault_created_by_two_writers_at_once_has_one_key(tmp_path):
    path = tmp_path / "v" / "secrets.jsonl"
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        keys.append(Vault(path).key())

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1
    # No temporary file left; the .gitignore keeps the vault out of any git add.
    assert sorted(os.listdir(tmp_path / "v")) == [".gitignore", "secrets.jsonl"]


# ------------------------------------------------------------------------- throughput


def test_throughput(capsys):
    """Prints MB/s on a few MB of real session records; asserts nothing about time."""
    records = [(len(raw), value) for raw, value in fixture_lines()]
    size = sum(n for n, _ in records)
    rounds = max(1, (4 << 20) // size)
    r = Redactor(key=KEY)
    start = time.perf_counter()
    found = 0
    for _ in range(rounds):
        for _n, rec in records:
            found += len(r.redact_value(rec)[1])
    value_rate = rounds * size / (time.perf_counter() - start) / 1e6
    text = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for _n, rec in records)
    start = time.perf_counter()
    r.redact_text(text)
    text_rate = len(text.encode()) / (time.perf_counter() - start) / 1e6
    assert found > 0  # the corpus session is among the fixtures
    with capsys.disabled():
        print(
            f"\nredaction throughput: redact_value {value_rate:.1f} MB/s over {rounds * size / 1e6:.1f} MB "
            f"of records; redact_text {text_rate:.1f} MB/s over one {len(text) / 1e6:.1f} MB text"
        )
