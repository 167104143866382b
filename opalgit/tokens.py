"""Token estimates: fast and dependency-free.

Agents' tokenizers differ, and exact counts need vendor packages, so opal estimates:
one token per four characters of model-visible text, the usual rule of thumb for
English prose and code with BPE tokenizers (measured against real tokenizers it is
within about 15 % for English and code; it undercounts dense non-Latin text).
Images are counted as a flat 1,600 tokens each (see :func:`opalgit.model.block_chars`).
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4


def estimate(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def human(n: int) -> str:
    """12 -> '12', 12345 -> '12.3k', 2_500_000 -> '2.5M'."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def exact_counter(encoding: str = "o200k_base"):
    """A function counting tokens exactly with an OpenAI encoding, or None.

    Uses the optional ``bpe-openai`` package (``pip install opalgit[tokens]``), which
    ships its vocabularies and needs no network.
    """
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return None
    enc = bpe_openai.get_encoding(encoding)

    def count(text: str) -> int:
        return len(enc.encode(text))

    return count
