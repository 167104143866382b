"""The Gemini API's content parts (``Part``), as Gemini CLI and Qwen Code both record them.

Qwen Code is a fork of Gemini CLI: its records hold the same ``{"parts": [...]}`` messages
(text, thought, inlineData, functionCall, functionResponse). What a part means, and how a
normalized result becomes parts again, is the API's, not either agent's, so both adapters
take it from here (adapters never import each other; shared cross-agent knowledge lives
beside :mod:`opalgit.agents.tools`).
"""

from __future__ import annotations

from typing import Any, Callable

from opalgit import jsonl

__all__ = ["part_block", "response_text", "result_parts"]


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _json_text(value: Any) -> str:
    return jsonl.dumps(value).decode("utf-8", "surrogatepass")


def response_text(resp: Any, *, error_wins: bool = False) -> tuple[str, bool]:
    """A ``functionResponse.response`` as text, and whether it is an error. ``error_wins``:
    a response with both ``output`` and ``error`` is the error (Qwen Code's reading; Gemini
    CLI's takes the output)."""
    if isinstance(resp, dict):
        if isinstance(resp.get("output"), str) and not (error_wins and "error" in resp):
            return resp["output"], False
        if "error" in resp:
            err = resp["error"]
            return (err if isinstance(err, str) else _json_text(err)), True
    if isinstance(resp, str):
        return resp, False
    return ("" if resp is None else _json_text(resp)), False


def part_block(part: Any, *, error_wins: bool = False) -> dict:
    """The normalized block of one ``Part``."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return {"type": "other", "kind": type(part).__name__}
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            out: dict[str, Any] = {"type": "reasoning", "text": part["text"]}
            if _is_id(part.get("thoughtSignature")):
                out["signed"] = True
            return out
        return {"type": "text", "text": part["text"]}
    if isinstance(part.get("inlineData"), dict):
        d = part["inlineData"]
        return {"type": "image", "media_type": d.get("mimeType"), "data": d.get("data")}
    if isinstance(part.get("fileData"), dict) and str(part["fileData"].get("mimeType", "")).startswith("image/"):
        return {"type": "image", "url": part["fileData"].get("fileUri")}
    if isinstance(part.get("functionCall"), dict):
        fc = part["functionCall"]
        return {"type": "tool_call", "id": fc.get("id"), "name": fc.get("name"), "input": fc.get("args")}
    if isinstance(part.get("functionResponse"), dict):
        fr = part["functionResponse"]
        text, err = response_text(fr.get("response"), error_wins=error_wins)
        return {"type": "tool_result", "call_id": fr.get("id"), "name": fr.get("name"), "output": text, "is_error": err}
    kind = next((k for k in part if k not in ("thoughtSignature", "thought")), "unknown")
    return {"type": "other", "kind": kind}


def result_parts(output: Any, image: Callable[[dict], dict | None], drop: Callable[[str], None]) -> tuple[str, list]:
    """A normalized result's output as the response text and the parts that follow it (its
    images, each made by ``image``); anything else in it is dropped, and ``drop`` says so."""
    if not isinstance(output, list):
        return ("" if output is None else str(output)), []
    texts, extra = [], []
    for b in output:
        if isinstance(b, dict) and b.get("type") == "text":
            texts.append(b.get("text") or "")
        elif isinstance(b, dict) and b.get("type") == "image":
            part = image(b)
            if part:
                extra.append(part)
        else:
            drop("content:other")
    return "\n".join(texts), extra
