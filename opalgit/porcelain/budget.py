"""Fitting an export into a target context size (``opal export --budget TOKENS``). Pure.

Two steps, in this order, each only as far as needed:

1. the largest tool outputs are replaced by a marked stub (the call and its result
   stay, so the agent still sees what it ran and that the output was left out);
2. then the oldest turns are left out, whole exchanges at a time, so that a tool
   call is never separated from its result; a marker turn at the start says how
   many turns were left out.

The last user prompt and everything after it are always kept. A turn that is
changed (a stubbed output) becomes an opal-authored turn, which every exporter
writes from its normalized view.
"""

from __future__ import annotations

from opalgit.agents.base import ExportTurn, LossReport
from opalgit.history.model import Normal, Turn, block_chars
from opalgit.history.tokens import estimate
from opalgit.structs import dataclass

STUB = "[opal: tool output of {chars} characters left out to fit the token budget]"


@dataclass
class BudgetResult:
    turns: list[ExportTurn]
    before: int  # estimated tokens
    after: int
    report: LossReport


def _tokens(t: ExportTurn) -> int:
    if t.normal.role == "meta":
        return 0
    return estimate(sum(block_chars(b) for b in t.normal.blocks))


def fit(turns: list[ExportTurn], budget: int) -> BudgetResult:
    report = LossReport()
    before = sum(_tokens(t) for t in turns)
    total = before
    if total <= budget:
        return BudgetResult(turns, before, total, report)
    out = list(turns)

    # 1. Stub the largest tool outputs first.
    candidates: list[tuple[int, int, int]] = []  # (chars, turn index, block index)
    for i, t in enumerate(out):
        if t.normal.role == "meta":
            continue
        for j, b in enumerate(t.normal.blocks):
            if b.get("type") == "tool_result":
                chars = block_chars(b)
                if chars > len(STUB) + 40:
                    candidates.append((chars, i, j))
    candidates.sort(reverse=True)
    for chars, i, j in candidates:
        if total <= budget:
            break
        t = out[i]
        blocks = [dict(b) for b in t.normal.blocks]
        out_j = t.normal.blocks[j].get("output")
        # (block_chars counts estimate units, not characters: the stub says characters)
        stub = STUB.format(chars=len(out_j) if isinstance(out_j, str) else chars)
        old_tokens = _tokens(t)
        blocks[j]["output"] = stub
        normal = Normal(role=t.normal.role, blocks=blocks, time=t.normal.time, label=t.normal.label)
        out[i] = ExportTurn(Turn.authored(normal.role, blocks), normal)
        total += _tokens(out[i]) - old_tokens
        report.convert("budget:tool_output_stubbed")

    if total > budget:
        # 2. Leave out the oldest exchanges. Never cut inside the last prompt's exchange.
        last_user = max((i for i, t in enumerate(out) if t.normal.role == "user"), default=len(out))
        open_calls: set[str] = set()
        cut = 0
        dropped = 0
        for i, t in enumerate(out[:last_user]):
            if total <= budget and not open_calls:
                break
            for b in t.normal.blocks:
                if b.get("type") == "tool_call":
                    open_calls.add(str(b.get("id")))
                elif b.get("type") == "tool_result":
                    open_calls.discard(str(b.get("call_id")))
            total -= _tokens(t)
            if t.normal.role != "meta":
                dropped += 1
            cut = i + 1
        if open_calls:
            # The exchange runs into the kept part; keep it whole instead.
            while cut > 0 and open_calls:
                cut -= 1
                t = out[cut]
                total += _tokens(t)
                if t.normal.role != "meta":
                    dropped -= 1
                for b in t.normal.blocks:
                    if b.get("type") == "tool_call":
                        open_calls.discard(str(b.get("id")))
        if cut:
            marker_text = f"[opal: {dropped} earlier turns were left out of this session to fit a budget of {budget} tokens]"
            marker = Normal(role="user", blocks=[{"type": "text", "text": marker_text}])
            out = [ExportTurn(Turn.authored("user", marker.blocks), marker)] + out[cut:]
            total += _tokens(out[0])
            report.drop("budget:turn_left_out", dropped)
    if total > budget:
        report.note(f"still ~{total} tokens after fitting: the last exchange alone exceeds the budget of {budget}")
    return BudgetResult(out, before, total, report)
