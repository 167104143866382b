"""``opal trim``: shrink every long tool output of the current branch to a marked excerpt.

A commit of its own on the current branch, as drop's (the old state stays reachable and
``opal undo`` reverts); the agent's native record is rewritten where its adapter can
(``replace_tool_outputs``), so that an export still resumes.
"""

from __future__ import annotations

import re

from opalgit import agents as adapters
from opalgit import codec
from opalgit.errors import NothingToDoError, UsageError
from opalgit.history import sequence
from opalgit.history.model import Normal, Turn, summarize
from opalgit.history.sequence import Item
from opalgit.history.states import State, turn_of
from opalgit.history.tokens import estimate
from opalgit.porcelain.drop import EditResult, commit_edit, current_head
from opalgit.porcelain.states import normal_of
from opalgit.store.repo import Repository
from opalgit.structs import dataclass

EXCERPT_MARK = "[opal: {cut} characters of this tool output were trimmed; {kept} kept]"
_MARK_RE = re.compile(r"\[opal: \d+ characters of this tool output were trimmed; \d+ kept\]")




def parse_size(text: str) -> int:
    """``20k`` -> 20000, ``1.5M`` -> 1500000, ``800`` -> 800 (characters)."""
    t = text.strip().lower()
    mult = 1
    if t.endswith("k"):
        mult, t = 1000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    try:
        value = int(float(t) * mult)
    except ValueError:
        raise UsageError(f"{text!r} is not a size", hint="e.g. 20000, 20k or 1.5M (characters)") from None
    if value <= 0:
        raise UsageError("the size must be positive")
    return value


def excerpt(text: str, limit: int) -> str:
    """Head and tail of ``text`` within about ``limit`` characters, with a marker between."""
    if len(text) <= limit:
        return text
    head = max(0, int(limit * 0.7))
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    mark = EXCERPT_MARK.format(cut=cut, kept=head + tail)
    return text[:head] + "\n" + mark + "\n" + (text[-tail:] if tail else "")


def _shorter(text: str, over: int, keep: int) -> str | None:
    """The excerpt that replaces ``text``, or None: too short to trim, or an excerpt (with
    its marker) that would not be shorter than the text itself."""
    # An excerpt already: its own marker does not count, or every trim at this size
    # would cut the last one's excerpt again (and lose what its marker said).
    if len(text) - sum(len(m.group(0)) + 2 for m in _MARK_RE.finditer(text)) <= over:
        return None
    cut = excerpt(text, keep)
    return cut if len(cut) < len(text) else None


@dataclass
class TrimPlan:
    """What trimming a state's tool outputs over a size would change, before anything
    is written: what ``opal trim`` commits, and what ``opal web``'s budget page offers."""

    items: list[Item]  # every record of the state, the trimmed ones replaced
    changed: int  # tool outputs that get shorter
    chars_delta: int  # (negative) change of the state's characters
    first_changed: int | None  # index of the first replaced record
    keep: int

    def saved(self, state: State) -> int:
        """Estimated tokens the trim saves, as its result reports them."""
        return estimate(state.header.chars) - estimate(state.header.chars + self.chars_delta)


def default_keep(over: int) -> int:
    """A quarter of the size, at least 200 characters, and always well below the size."""
    return min(max(200, over // 4), over // 2)


def plan_trim(repo: Repository, state: State, over: int, keep: int | None = None) -> TrimPlan:
    """The records of ``state`` with every tool output longer than ``over`` characters
    shrunk to a marked excerpt of ``keep``. Reads only; nothing is written.

    An output is replaced only when its excerpt is shorter, so a trim never grows the
    context and never counts an output it left as it was.
    """
    keep = keep if keep is not None else default_keep(over)
    new_items: list[Item] = []
    changed = 0
    chars_delta = 0
    first_changed: int | None = None
    for index, si in enumerate(sequence.iter_items(repo.store, state.root)):
        it = si.item
        replaced = None
        if it.summary.get("kind") == "tool_result" and int(it.summary.get("chars", 0)) > over:
            replaced = _trim_turn(turn_of(repo, it), normal_of(repo, it), over, keep)
        if replaced is None:
            new_items.append(it)
            continue
        payloads: dict[bytes, bytes] = {}
        canon = replaced[0].encode(payloads)
        item = Item(codec.digest(canon), canon, summarize(replaced[1]), payloads=payloads)
        chars_delta += int(item.summary.get("chars", 0)) - int(it.summary.get("chars", 0))
        new_items.append(item)
        changed += 1
        if first_changed is None:
            first_changed = index
    return TrimPlan(new_items, changed, chars_delta, first_changed, keep)


def trim(repo: Repository, over: int, *, keep: int | None = None) -> EditResult:
    """Shrink every tool output longer than ``over`` characters to a marked excerpt
    (see :func:`plan_trim`), as a commit on the current branch."""
    if keep is not None and keep >= over:
        raise UsageError(
            f"--keep {keep} is not below --tool-output-over {over}: nothing would get shorter",
            hint="keep less than the size that triggers a trim, e.g. --tool-output-over 20k --keep 5k",
        )
    with repo.lock():
        branch, head, state = current_head(repo)
        plan = plan_trim(repo, state, over, keep)
        keep, changed, chars_delta, first_changed = plan.keep, plan.changed, plan.chars_delta, plan.first_changed
        if not changed:
            longer = sum(1 for si in sequence.iter_items(repo.store, state.root) if si.item.summary.get("kind") == "tool_result" and int(si.item.summary.get("chars", 0)) > over)
            if longer:
                raise NothingToDoError(
                    f"no tool output over {over} characters would get shorter by keeping {keep} of it "
                    f"({longer} {'is' if longer == 1 else 'are'} over the size, each with its marker as long or longer)"
                )
            raise NothingToDoError(f"no tool output is longer than {over} characters")
        assert first_changed is not None
        root = sequence.splice(repo.store, state.root, first_changed, state.header.items, plan.items[first_changed:])
        chars = state.header.chars + chars_delta
        oid = commit_edit(
            repo, branch, head, state, root,
            items=state.header.items, turns=state.header.turns, chars=chars,
            command="trim", message=f"trim {changed} tool output{'s' if changed != 1 else ''} over {over} characters\n",
            description=f"trim {changed} tool output{'s' if changed != 1 else ''} of {branch}",
            extra={"op": "trim", "over": over, "changed": changed},
        )
        return EditResult(
            branch, oid, "trim", state.header.turns, state.header.turns,
            estimate(state.header.chars), estimate(chars), None, [], changed,
        )


def _trim_turn(turn: Turn, normal: Normal, over: int, keep: int) -> tuple[Turn, Normal] | None:
    def replace(call_id: str, text: str) -> str | None:
        return _shorter(text, over, keep)

    blocks: list[dict] = []
    touched = False
    for b in normal.blocks:
        if b.get("type") == "tool_result" and isinstance(b.get("output"), str):
            cut = _shorter(b["output"], over, keep)
            if cut is not None:
                b = dict(b, output=cut)
                touched = True
        elif b.get("type") == "tool_result" and isinstance(b.get("output"), list):
            parts = []
            for p in b["output"]:
                cut = _shorter(p.get("text") or "", over, keep) if isinstance(p, dict) and p.get("type") == "text" else None
                if cut is not None:
                    p = dict(p, text=cut)
                    touched = True
                parts.append(p)
            b = dict(b, output=parts)
        blocks.append(b)
    if not touched:
        return None
    new_normal = Normal(role=normal.role, blocks=blocks, time=normal.time, label=normal.label)
    if turn.agent != "opal":
        try:
            native = adapters.get(turn.agent).replace_tool_outputs(turn, replace)
        except Exception:
            native = None
        if native is not None:
            return native, adapters.get(turn.agent).normalize(native)
    return Turn.authored(normal.role, blocks), new_normal
