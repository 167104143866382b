"""Line attribution: which recorded tool call, or which code commit, last wrote each line.

Pure: the file's versions (one per code commit that changed it, oldest first, and
perhaps the working tree last) and the changes recorded tool calls made to it come in
as values; who owns each line of the last version comes out. The porcelain
(:mod:`opalgit.porcelain.blame`) reads those values from git and from the states.

The rule (docs/blame.md). Between two versions of the file, the recorded changes whose
time falls after the older version's commit and up to the newer one's are replayed, in
order, on the older version's lines: a line an edit produced belongs to the tool call
that made it; a line it left as it was keeps its owner (git blame's rule). The replayed
text is then matched, line for line, against what the newer commit really holds: a
line that no replayed change explains was changed by a person, in that commit
(``human``), or is not committed yet (``uncommitted``). Nothing is guessed:

* an edit whose old text is not in the replayed file (a person changed it first, or
  the call failed) cannot be replayed; a line it may have produced is matched by its
  text to that call only when exactly one such call produced a line with that text,
  and is ``unattributed`` otherwise;
* a change that may have written the file in a way opal cannot replay (a shell
  command naming it) makes the lines no change explains ``unattributed``, not human;
* a version committed before opal recorded any session is ``unattributed``.

Commit times are whole seconds and turn times milliseconds: the changes in the very
second of a commit count before it as far as that makes the replay disagree with the
commit on fewer lines (all of them when it makes no difference), after it otherwise.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from itertools import accumulate
from typing import Iterable, Sequence

from opalgit.structs import dataclass


@dataclass(frozen=True)
class Owner:
    """Who last wrote a line.

    ``kind`` is ``agent`` (a recorded tool call: agent, session, state, turn, prompt,
    time, tool), ``human`` (a code commit no recorded tool call explains: commit,
    author, time), ``uncommitted`` (a working-tree line no recorded tool call explains)
    or ``unattributed`` (``reason`` says why).
    """

    kind: str
    agent: str | None = None
    session: str | None = None
    state: bytes | None = None
    turn: int | None = None
    prompt: str | None = None
    time: int | None = None  # ms since the epoch
    tool: str | None = None
    model: str | None = None
    call: str | None = None  # the tool call's id in its session
    commit: bytes | None = None  # the code commit (human, unattributed)
    author: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Change:
    """What one recorded tool call did to the file.

    ``op``: ``write`` (``content`` is the whole file), ``edit`` (``old`` -> ``new``,
    every occurrence with ``all``), ``hunks`` (a patch's ``(old, new)`` line blocks,
    with their context, in file order), ``delete``, or ``opaque`` (it may have written
    the file in a way that cannot be replayed: ``why``).
    """

    op: str
    time: int  # ms since the epoch
    owner: Owner
    content: str = ""
    old: str = ""
    new: str = ""
    all: bool = False
    hunks: tuple = ()
    why: str = ""


@dataclass(frozen=True)
class Version:
    """The file in one code commit (``commit`` None: the working tree); ``text`` None: absent."""

    commit: bytes | None
    time: int  # seconds since the epoch (the committer's); ignored for the working tree
    author: str
    text: str | None
    covered: bool = True  # False: committed before opal recorded any session


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, in the last version
    text: str  # without its line end
    owner: Owner
    commit: bytes | None  # the code commit the line first appeared in with this owner (None: uncommitted)


Lines = list  # of [text with its line end, Owner, commit]


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (the last may have none): git splits on ``\\n`` alone."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _key(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


# ------------------------------------------------------------------ replaying changes


def _assign(old: list, new_texts: list[str], owner: Owner) -> list:
    """``new_texts`` in place of the lines ``old``: lines kept as they were keep their owner."""
    # Lines compare with their line ends, as git's do (a last line that gains one changed).
    a = [x[0] for x in old]
    out: list = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, new_texts, autojunk=False).get_opcodes():
        if tag == "equal":
            out.extend([new_texts[j1 + k], old[i1 + k][1], old[i1 + k][2]] for k in range(i2 - i1))
        else:
            out.extend([t, owner, None] for t in new_texts[j1:j2])
    return out


def _edit(lines: list, old: str, new: str, every: bool, owner: Owner) -> list | None:
    texts = [x[0] for x in lines]
    text = "".join(texts)
    if old == "":
        # An edit with no old text creates the file; on a file with content it fails.
        return _assign(lines, split_lines(new), owner) if text == "" else None
    found: list[int] = []
    at = text.find(old)
    while at >= 0:
        found.append(at)
        if not every:
            break
        at = text.find(old, at + len(old))
    if not found or (not every and text.find(old, found[0] + 1) >= 0):
        return None  # not there, or not unique: the tool itself refuses such an edit
    starts = [0, *accumulate(map(len, texts))]
    out = list(lines)
    for s in reversed(found):
        e = s + len(old)
        a = _line_at(starts, s)
        b = _line_at(starts, e - 1)
        region = text[starts[a]:s] + new + text[e:starts[b + 1]]
        out[a:b + 1] = _assign(lines[a:b + 1], split_lines(region), owner)
    return out


def _line_at(starts: list[int], offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(starts, offset) - 1


def _hunks(lines: list, hunks: Sequence, owner: Owner) -> list | None:
    out = list(lines)
    pos = 0
    for old, new in hunks:
        old_l = [_key(t) for t in split_lines(old)]
        new_t = split_lines(new)
        if new_t and not new_t[-1].endswith("\n"):
            new_t[-1] += "\n"
        if not old_l:
            at = len(out)  # a hunk with no context adds at the end, as apply_patch does
        else:
            keys = [_key(x[0]) for x in out]
            hits = [i for i in range(pos, len(keys) - len(old_l) + 1) if keys[i:i + len(old_l)] == old_l]
            if len(hits) != 1:
                return None  # not there, or where is not certain
            at = hits[0]
        out[at:at + len(old_l)] = _assign(out[at:at + len(old_l)], new_t, owner)
        pos = at + len(new_t)
    return out


def replay(lines: list, change: Change) -> list | None:
    """The lines after ``change``, or None when it cannot be replayed on them."""
    if change.op == "write":
        return _assign(lines, split_lines(change.content), change.owner)
    if change.op == "edit":
        return _edit(lines, change.old, change.new, change.all, change.owner)
    if change.op == "hunks":
        return _hunks(lines, change.hunks, change.owner)
    if change.op == "delete":
        return []
    return None


# ------------------------------------------------------------------ one interval


def _produced(change: Change) -> set[str]:
    """The line texts a change writes that were not there before it: what its new text is
    matched by when it cannot be replayed (a line also in its old text it only kept)."""
    if change.op == "write":
        return _keys(change.content)
    if change.op == "edit":
        return _keys(change.new) - _keys(change.old)
    if change.op == "hunks":
        return set().union(*(_keys(new) - _keys(old) for old, new in change.hunks)) if change.hunks else set()
    return set()


def _keys(text: str) -> set[str]:
    return {_key(t) for t in split_lines(text) if _key(t).strip()}


def _interval(start: list, changes: Sequence[Change], version: Version) -> tuple[list, int]:
    """The lines of ``version`` with owners, after replaying ``changes`` on ``start``; and
    how many lines the replay and the version disagree on."""
    cur = start
    failed: list[Change] = []
    for ch in changes:
        nxt = replay(cur, ch)
        if nxt is None:
            failed.append(ch)
            continue
        if ch.op == "write" and failed:
            # The replay had lost track (an edit it could not make): a line this write
            # only carried over may be that edit's, known by its text.
            for row in nxt:
                if row[1] is ch.owner:
                    by_text = [f for f in failed if _key(row[0]) in _produced(f)]
                    if len(by_text) == 1:
                        row[1] = by_text[0].owner
        cur = nxt
    target = split_lines(version.text or "")
    a = [x[0] for x in cur]
    b = target
    if a == b:  # the replay is the commit (the common case): every line as replayed
        return [[t, row[1], row[2] if row[2] is not None else version.commit] for t, row in zip(target, cur)], 0
    out: list = [None] * len(target)
    explained = 0
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                _, owner, commit = cur[i1 + k]
                out[j1 + k] = [target[j1 + k], owner, commit if commit is not None else version.commit]
            explained += i2 - i1
    for j, row in enumerate(out):
        if row is None:
            out[j] = [target[j], _unexplained(_key(b[j]), failed, version), version.commit]
    return out, len(a) + len(b) - 2 * explained


def _unexplained(text: str, failed: list[Change], version: Version) -> Owner:
    if not version.covered:
        return Owner("unattributed", commit=version.commit, author=version.author,
                     reason="committed before opal recorded any agent session in this repository")
    by_text = [ch for ch in failed if ch.op != "opaque" and text.strip() and text in _produced(ch)]
    if len(by_text) == 1:
        return by_text[0].owner
    if failed:
        ch = failed[-1]
        o = ch.owner
        what = ch.why or "its old text was not in the file as replayed (a person may have changed it first)"
        return Owner("unattributed", commit=version.commit, author=version.author,
                     reason=f"a recorded {o.tool or 'tool call'} of {o.agent} (turn {o.turn}) could not be "
                            f"replayed: {what}; this line may be its or a person's")
    if version.commit is None:
        return Owner("uncommitted")
    return Owner("human", commit=version.commit, author=version.author, time=version.time * 1000)


def attribute(versions: Sequence[Version], changes: Iterable[Change]) -> list[Line]:
    """The owner of every line of the last of ``versions`` (oldest first)."""
    pending = sorted(changes, key=lambda c: c.time)
    lines: list = []
    k = 0
    for version in versions:
        last = version.commit is None
        # Changes in (prev_time, version.time]; the working tree takes all that are left.
        upto = k
        while upto < len(pending) and (last or pending[upto].time // 1000 < version.time):
            upto += 1
        same = upto
        while not last and same < len(pending) and pending[same].time // 1000 == version.time:
            same += 1
        best: tuple[int, int, list] | None = None
        for cut in range(same, upto - 1, -1):  # more of the same second first: ties count them in
            out, wrong = _interval(lines, pending[k:cut], version)
            if best is None or wrong < best[0]:
                best = (wrong, cut, out)
        assert best is not None
        _, k, lines = best
    return [Line(i + 1, _key(row[0]), row[1], row[2]) for i, row in enumerate(lines)]
