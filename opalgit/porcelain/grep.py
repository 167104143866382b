"""``opal grep``: regular expressions over the turns of states, each stored record searched once.

What is searched is what the agent and the user saw, from each record's normalized view
(:class:`opalgit.history.model.Normal`): the text of prompts and replies, reasoning, the
name and every string of a tool call's input, and a tool result's text. Images and
bookkeeping (``meta`` records: attachments, progress, subagent side chains) are not, unless
``--role meta`` asks for those records.

Why each record is searched once: states share their records. A branch made at turn 40,
a rewind, a merge and every later commit of the same session keep the same leaves of the
sequence tree (:mod:`opalgit.history.sequence`), and a leaf's records are content
addressed. So the search walks each state's tree, and a leaf that an earlier state (or an
earlier place in this one) already had is not read, decoded or searched again: its result
is reused by the leaf's object id. Grepping ``--all`` over ten branches of one session
costs about what grepping one does.

A record that cannot hold a match is not even decoded: when every match of the pattern must
contain one of a few plain ASCII literals (``Traceback|FAILED``, ``def farewell``, ``-F`` text),
a record whose stored bytes and payloads hold none of them is passed over, for the agents
whose normalized texts are the record's own strings (``Adapter.verbatim_texts``: Claude Code;
Gemini CLI joins parts and adds headings, Codex writes some outputs as JSON text, so their
records are always read). See
:func:`required_literals` for when a literal is sound; each payload is tested once, whatever
records refer to it.

A record is normalized alone (its adapter's ``normalize``), also for an agent whose
adapter replays a log (Gemini CLI's ``$set`` lines): a match is shown where its text was
recorded. A record that cannot be read is not skipped in silence: it is counted and named
(``GrepResult.unreadable``), and ``opal fsck`` says why.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Iterable, Iterator

from opalgit import agents, codec
from opalgit.errors import OpalError, UsageError
from opalgit.history import payloads, sequence
from opalgit.history.model import Normal
from opalgit.history.sequence import Item, Node
from opalgit.history.states import current_branch, load_state, resolve
from opalgit.porcelain.states import normal_of
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

#: What a matched line came from (``GrepLine.block``).
BLOCKS = ("prompt", "reply", "reasoning", "call", "result", "text")
#: The roles ``--role`` takes (the normalized model's).
ROLES = ("user", "assistant", "tool", "system", "meta")


@dataclass(frozen=True)
class GrepLine:
    """One matching line of one block of a record."""

    block: str  # one of BLOCKS
    tool: str | None  # the tool, for a call or a result
    key: str | None  # for a call: the input field the line is from ("command", "new_string", ...)
    call_id: str | None  # for a call or a result: the call's id (how a result finds its tool)
    line: int  # 1-based line number within that text
    text: str
    spans: tuple[tuple[int, int], ...]  # the matches, as character offsets into ``text``


@dataclass(frozen=True)
class GrepTurn:
    """The matches of one record of one state."""

    label: str  # how the state was named: its branch, or the revision as given
    commit: bytes
    turn: int | None  # 1-based turn number; None for a meta record
    record: int  # 0-based record index
    role: str
    lines: tuple[GrepLine, ...]

    @property
    def where(self) -> str:
        """``branch:turn`` (``branch:@record`` for a meta record, which has no turn number)."""
        return f"{self.label}:{self.turn}" if self.turn is not None else f"{self.label}:@{self.record + 1}"

    def to_json(self) -> dict:
        return {
            "rev": self.label, "commit": self.commit.hex(), "turn": self.turn, "record": self.record + 1,
            "role": self.role,
            "lines": [{"block": x.block, "tool": x.tool, "key": x.key, "call_id": x.call_id, "line": x.line,
                       "text": x.text, "spans": [list(s) for s in x.spans]} for x in self.lines],
        }


@dataclass
class GrepStats:
    """What the search read: states, records in them, and how many were searched for real."""

    states: int = 0
    records: int = 0  # records in the states searched (a shared record counts in each)
    leaves: int = 0  # leaves of those states' trees
    leaves_searched: int = 0  # distinct leaves read and searched
    records_searched: int = 0  # distinct records normalized and searched
    records_skipped: int = 0  # distinct records whose stored bytes hold none of the pattern's literals

    def to_json(self) -> dict:
        return {"states": self.states, "records": self.records, "leaves": self.leaves,
                "leaves_searched": self.leaves_searched, "records_searched": self.records_searched,
                "records_skipped": self.records_skipped}


@dataclass
class GrepResult:
    turns: list[GrepTurn] = field(default_factory=list)
    stats: GrepStats = field(default_factory=GrepStats)
    #: ``(state label, record number, why)`` for records that could not be read
    unreadable: list[tuple[str, int, str]] = field(default_factory=list)


def compile_pattern(pattern: str, *, ignore_case: bool = False, fixed: bool = False) -> re.Pattern[str]:
    """The pattern as a Python regular expression (``-F``: a literal string)."""
    if pattern == "":
        raise UsageError("an empty pattern matches everything", hint="give a pattern, e.g. opal grep 'TODO'")
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        return re.compile(re.escape(pattern) if fixed else pattern, flags)
    except re.error as exc:
        raise UsageError(f"the pattern {pattern!r} is not a regular expression: {exc}",
                         hint="Python's re syntax; -F searches for the literal text") from None


# ----------------------------------------------------------------------------- the literal prefilter

# Characters a literal may have for its absence from a record's stored bytes to prove that no
# normalized text of the record holds it. A record is stored as msgpack (its strings as UTF-8,
# unescaped) or, for a verbatim line, as the JSON text the agent wrote; and an adapter's
# normalized view takes its texts from the record's strings (a Codex call's input parsed from a
# JSON string included). So a literal is safe when JSON never has to escape it: printable ASCII
# without '"' and '\\', and without the characters some writers escape anyway ('/' as '\\/';
# '<', '>' and '&' as \\u003c ...). A literal made of nothing but the characters of a number is
# not: grep searches a number in a tool's input as its text (tokens: 15000), which msgpack stores
# as a number.
_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - set('"\\/<>&')
_NUMBER = frozenset("0123456789.+-eEinfaINFA")
_MIN_LITERAL = 3


def required_literals(rx: re.Pattern[str]) -> tuple[str, ...] | None:
    """Literals one of which every match of ``rx`` contains, when the prefilter is sound for them.

    A pattern that is a sequence yields its longest run of literal characters; an alternation
    at the top, one such run from each alternative. None when any part has no run of
    :data:`_MIN_LITERAL` safe characters (the record is then always searched)."""
    from re import _constants as sre  # noqa: PLC0415  (the parser's own node names)
    from re import _parser

    try:
        tree = _parser.parse(rx.pattern, rx.flags & ~re.IGNORECASE)
    except Exception:  # a pattern Python's re compiles always parses; never fail the search on it
        return None
    nodes = list(tree)
    if len(nodes) == 1 and nodes[0][0] is sre.BRANCH:
        branches = nodes[0][1][1]
    else:
        branches = [nodes]
    out = []
    for seq in branches:
        best, run = "", ""
        for op, arg in list(seq) + [(None, None)]:
            if op is sre.LITERAL and chr(arg) in _SAFE:
                run += chr(arg)
                continue
            if len(run) > len(best):
                best = run
            run = ""
        if len(best) < _MIN_LITERAL or set(best) <= _NUMBER:
            return None
        out.append(best)
    return tuple(dict.fromkeys(out))


class _Prefilter:
    """Whether a stored record may hold a match, from its bytes and its payloads' (each payload
    tested once). Case-insensitive patterns test the bytes decoded, with the same regular
    expression machinery: ASCII letters also match a few others under Unicode case folding
    (k and the Kelvin sign), which a byte comparison would miss."""

    def __init__(self, repo: Repository, literals: tuple[str, ...], ignore_case: bool) -> None:
        self.repo = repo
        self.needles = [x.encode() for x in literals]
        self.rx = re.compile("|".join(re.escape(x) for x in literals), re.IGNORECASE) if ignore_case else None
        self._payloads: dict[bytes, bool] = {}
        self._agents: dict[str, bool] = {"opal": True}  # opal's own turns store their blocks as they are

    def _verbatim(self, item: Item) -> bool:
        """Whether the record's agent gives texts made only of the record's strings
        (:attr:`opalgit.agents.base.Adapter.verbatim_texts`); else the record is always read."""
        try:
            agent = codec.unpack_canonical(item.canon, "turn").get("agent")
        except Exception:  # an unreadable record: searching it reports it
            return False
        known = self._agents.get(agent) if isinstance(agent, str) else False
        if known is None:
            try:
                known = bool(agents.get(agent).verbatim_texts)
            except Exception:  # an agent opal has no adapter for: read it, and say so there
                known = False
            self._agents[agent] = known
        return bool(known)

    def _has(self, data: bytes) -> bool:
        if self.rx is not None:
            return self.rx.search(data.decode("utf-8", "replace")) is not None
        return any(n in data for n in self.needles)

    def may_match(self, item: Item) -> bool:
        if not self._verbatim(item) or self._has(item.canon):
            return True
        for digest, loc in item.payload_oids.items():
            known = self._payloads.get(digest)
            if known is None:
                known = self._payloads[digest] = self._has(payloads.load(self.repo.store, digest, loc))
            if known:
                return True
        return any(self._has(data) for data in item.payloads.values())


# ----------------------------------------------------------------------------- the texts of a record


def _strings(value: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    """Every string inside a tool call's input, with the field it sits in (the innermost key)."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, key)
    elif value is not None and not isinstance(value, bool):
        yield key, str(value)


def _result_texts(output: Any) -> Iterator[str]:
    """A result's texts: its text, its text blocks joined by newlines, or, for structured
    output (a Codex result as an object), each string inside it (as a call's input)."""
    if isinstance(output, str):
        yield output
    elif isinstance(output, list) and all(isinstance(b, dict) for b in output):
        yield "\n".join(b.get("text") or "" for b in output if b.get("type") == "text")
    elif output is not None:
        for _key, s in _strings(output):
            yield s


def texts(normal: Normal) -> Iterator[tuple[str, str | None, str | None, str | None, str]]:
    """``(block, tool, key, call id, text)`` for every searchable text of a normalized record, in order.

    A result names its tool when the record says it (Codex and Gemini do, and a record
    holding the call too); a Claude ``tool_result`` record names only its call's id, and
    the state walk resolves it (:meth:`Searcher.state`)."""
    calls = {str(b.get("id")): str(b.get("name") or "") for b in normal.blocks if b.get("type") == "tool_call"}
    for b in normal.blocks:
        kind = b.get("type")
        if kind == "tool_call":
            name = str(b.get("name") or "")
            cid = None if b.get("id") is None else str(b.get("id"))
            yield "call", name, "name", cid, name
            inp = b.get("input")
            for key, s in _strings(inp) if not isinstance(inp, str) else [(None, inp)]:
                yield "call", name, key, cid, s
        elif kind == "tool_result":
            cid = None if b.get("call_id") is None else str(b.get("call_id"))
            tool = b.get("name") or calls.get(str(cid)) or None
            for text in _result_texts(b.get("output")):
                yield "result", tool, None, cid, text
        elif kind == "text":
            block = {"user": "prompt", "assistant": "reply"}.get(normal.role, "text")
            yield block, None, None, None, b.get("text") or ""
        elif kind == "reasoning":
            yield "reasoning", None, None, None, b.get("text") or ""


def match_lines(rx: re.Pattern[str], normal: Normal) -> list[GrepLine]:
    """The lines of ``normal``'s texts that ``rx`` matches, each with its match spans."""
    out: list[GrepLine] = []
    for block, tool, key, cid, text in texts(normal):
        if not text or rx.search(text) is None:  # most texts do not match: one scan decides
            continue
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        spans_by_line: dict[int, list[tuple[int, int]]] = {}
        for m in rx.finditer(text):
            first = _line_of(starts, m.start())
            if m.end() == m.start() and first in spans_by_line:
                continue  # an empty match beside a real one adds nothing
            last = _line_of(starts, max(m.start(), m.end() - 1))
            for n in range(first, last + 1):  # a match over several lines marks each
                begin = max(m.start(), starts[n]) - starts[n]
                end = min(m.end(), _line_end(starts, n, text)) - starts[n]
                spans_by_line.setdefault(n, []).append((begin, max(begin, end)))
        for n, spans in sorted(spans_by_line.items()):
            out.append(GrepLine(block, tool, key if block == "call" else None, cid, n + 1,
                                text[starts[n]:_line_end(starts, n, text)], tuple(spans)))
    return out


def _line_end(starts: list[int], n: int, text: str) -> int:
    """Where line ``n`` (0-based) of ``text`` ends, its newline excluded."""
    return starts[n + 1] - 1 if n + 1 < len(starts) else len(text)


def _line_of(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos) - 1


# ----------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Hit:
    """A match inside a leaf, before it is placed in a state: the record's offset in the leaf."""

    offset: int
    role: str
    lines: tuple[GrepLine, ...]


@dataclass
class _LeafResult:
    """What one leaf gave, kept by the leaf's object id for every state that has the leaf."""

    hits: list[_Hit]
    unreadable: list[tuple[int, str]]  # (offset in the leaf, why)
    calls: dict[str, str]  # call id -> tool, of the calls its records make (from their summaries)
    turn_at: list[int | None]  # each record's turn number counted from the leaf's start (None: meta)


class Searcher:
    """One search over many states; remembers each leaf's result by its object id, and each
    record's by its content id, so shared history is searched once."""

    def __init__(self, repo: Repository, rx: re.Pattern[str], *, roles: frozenset[str] | None = None,
                 tools: frozenset[str] | None = None, prefilter: bool = True) -> None:
        self.repo, self.rx, self.roles, self.tools = repo, rx, roles, tools
        literals = required_literals(rx) if prefilter else None
        self.prefilter = _Prefilter(repo, literals, bool(rx.flags & re.IGNORECASE)) if literals else None
        self.stats = GrepStats()
        self._leaves: dict[bytes, _LeafResult] = {}
        self._records: dict[bytes, tuple[str, tuple[GrepLine, ...]] | str] = {}

    def _wanted(self, item: Item) -> bool:
        """Whether a record can match, from its stored summary alone (nothing decoded)."""
        s = item.summary
        role = s.get("role")
        if self.roles is None:
            if role == "meta":
                return False
        elif role not in self.roles:
            return False
        if self.tools is not None:
            named = set(str(s.get("tool") or "").split(","))
            if s.get("kind") in ("tool_call", "tool_result") or s.get("calls") or s.get("results"):
                # A Claude result record names no tool in its summary: it is read, and
                # its calls' names resolved from the record itself where they can be.
                return bool(named & self.tools) or not s.get("tool")
            return False
        return True

    def _record(self, item: Item) -> tuple[str, tuple[GrepLine, ...]] | str:
        """``(role, lines)`` of one record, or why it could not be read."""
        known = self._records.get(item.id)
        if known is None and self.prefilter is not None and not self.prefilter.may_match(item):
            known = self._records[item.id] = ("", ())  # holds none of the pattern's literals
            self.stats.records_skipped += 1
        if known is None:
            self.stats.records_searched += 1
            try:
                normal = normal_of(self.repo, item)
                known = (normal.role, tuple(match_lines(self.rx, normal)))
            except (OpalError, ValueError, KeyError, TypeError) as exc:
                known = f"{type(exc).__name__}: {exc}"
            self._records[item.id] = known
        return known

    def _leaf(self, oid: bytes) -> _LeafResult:
        done = self._leaves.get(oid)
        if done is None:
            self.stats.leaves_searched += 1
            done = _LeafResult([], [], {}, [])
            turn = 0
            for k, item in enumerate(sequence.read_leaf(self.repo.store, oid)):
                turn += item.is_turn
                done.turn_at.append(turn if item.is_turn else None)
                _note_calls(item, done.calls)
                if not self._wanted(item):
                    continue
                got = self._record(item)
                if isinstance(got, str):
                    done.unreadable.append((k, got))
                elif got[1]:
                    done.hits.append(_Hit(k, got[0], got[1]))
            self._leaves[oid] = done
        return done

    def state(self, label: str, oid: bytes, result: GrepResult) -> list[GrepTurn]:
        """The matches of one state commit, in record order."""
        st = load_state(self.repo, oid)
        self.stats.states += 1
        self.stats.records += st.root.items if st.root is not None else 0
        out: list[GrepTurn] = []
        base = turns = 0  # records and turns before the current leaf
        calls: dict[str, str] = {}  # call id -> tool, of the calls of the records walked so far
        for leaf in _leaves(self.repo, st.root):
            self.stats.leaves += 1
            res = self._leaf(leaf.oid)
            calls.update(res.calls)
            if res.hits or res.unreadable:
                for h in res.hits:
                    lines = self._named(h.lines, calls)
                    if lines:
                        n = res.turn_at[h.offset]
                        out.append(GrepTurn(label, oid, None if n is None else turns + n, base + h.offset, h.role,
                                            lines))
                for k, why in res.unreadable:
                    result.unreadable.append((label, base + k + 1, why))
            base += leaf.items
            turns += leaf.turns
        return out

    def _named(self, lines: tuple[GrepLine, ...], calls: dict[str, str]) -> tuple[GrepLine, ...]:
        """The lines with each result's tool found by its call id (a Claude result names none), and
        with ``--tool``, only the lines of those tools' calls and results."""
        keep = []
        for x in lines:
            tool = x.tool or (calls.get(x.call_id) if x.call_id is not None else None)
            if self.tools is None or tool in self.tools:
                keep.append(x if x.tool == tool else GrepLine(x.block, tool, x.key, x.call_id, x.line, x.text, x.spans))
        return tuple(keep)


def _leaves(repo: Repository, root: Node | None) -> list[Node]:
    return sequence.leaves(repo.store, root) if root is not None else []


def _note_calls(item: Item, calls: dict[str, str]) -> None:
    """Add the call ids a record makes, with their tools, from its stored summary."""
    ids = item.summary.get("calls")
    if ids and item.summary.get("kind") == "tool_call":
        names = str(item.summary.get("tool") or "").split(",")
        if len(names) == len(ids):  # else a call without an id is among them: not told apart
            calls.update(zip((str(i) for i in ids), names))


def grep(repo: Repository, pattern: str, revs: Iterable[str] = (), *, all_branches: bool = False,
         ignore_case: bool = False, fixed: bool = False, roles: Iterable[str] = (),
         tools: Iterable[str] = (), prefilter: bool = True) -> GrepResult:
    """Every matching line of the states named (default HEAD; ``all_branches``: every branch,
    and every remote-tracking branch that was fetched), state by state in the order given."""
    rx = compile_pattern(pattern, ignore_case=ignore_case, fixed=fixed)
    wanted_roles = frozenset(roles) or None
    if wanted_roles is not None and not wanted_roles <= set(ROLES):
        bad = ", ".join(sorted(wanted_roles - set(ROLES)))
        raise UsageError(f"unknown role {bad}", hint=f"--role takes {', '.join(ROLES)}")
    searcher = Searcher(repo, rx, roles=wanted_roles, tools=frozenset(tools) or None, prefilter=prefilter)
    result = GrepResult(stats=searcher.stats)
    for label, oid in _states(repo, list(revs), all_branches):
        result.turns.extend(searcher.state(label, oid, result))
    return result


def _states(repo: Repository, revs: list[str], all_branches: bool) -> list[tuple[str, bytes]]:
    from opalgit.porcelain.branch import remote_branches

    if all_branches and revs:
        raise UsageError("--all searches every branch; name revisions or give --all, not both")
    if all_branches:
        named = sorted(repo.refs.branches().items())
        named += [(r.name, r.oid) for r in remote_branches(repo)]
        if not named:
            raise UsageError("there are no branches to search", hint="'opal commit' records a session first")
        return named
    out = []
    for rev in revs or ["HEAD"]:
        target = resolve(repo, rev)
        if target.turn is not None:
            raise UsageError(f"{rev} names a turn; grep searches whole states",
                             hint=f"name the state: opal grep PATTERN {rev.rsplit(':', 1)[0]}")
        out.append((_label(repo, rev, target.oid), target.oid))
    return out


def _label(repo: Repository, rev: str, oid: bytes) -> str:
    """How a state is named in the output: the revision as typed, or its branch for HEAD."""
    if rev in ("HEAD", "@"):
        cur = current_branch(repo)
        if repo.refs.branches().get(cur) == oid:
            return cur
    return rev
