"""Counting the characters of decoded UTF-8 across token boundaries.

Text is `bytes.decode("utf-8", "replace")` of the joined token bytes, which
replaces each maximal ill-formed subpart with one U+FFFD (Unicode 15, 3.9;
Rust's `from_utf8_lossy` does the same). To give each token its character
offset without decoding, the walk counts a character when its first byte
arrives and carries the sequence left open at a token's end as one int:
`continuation bytes still needed + 4 * kind`, where `kind` says which range
the next byte must fall in (Table 3-7: after E0 only A0..BF, after ED only
80..9F, after F0 only 90..BF, after F4 only 80..8F; else 80..BF). An open
sequence that does not continue ends as one U+FFFD, already counted. A state
of 0..3 is the plain count streams carried before the kinds were added.
"""

from __future__ import annotations

_NEXT_RANGE = ((0x80, 0xBF), (0xA0, 0xBF), (0x80, 0x9F), (0x90, 0xBF), (0x80, 0x8F))


def opens(lead: int) -> int:
    """The open state after a first byte: 0 when it starts no sequence
    (ASCII, or a byte that is a U+FFFD of its own)."""
    if lead < 0xC2 or lead > 0xF4:
        return 0
    if lead <= 0xDF:
        return 1
    if lead <= 0xEF:
        return 2 + 4 * (1 if lead == 0xE0 else 2 if lead == 0xED else 0)
    return 3 + 4 * (3 if lead == 0xF0 else 4 if lead == 0xF4 else 0)


def joins(state: int, byte: int) -> bool:
    """Whether `byte` continues the sequence `state` holds open."""
    if not state:
        return False
    low, high = _NEXT_RANGE[state >> 2]
    return low <= byte <= high


def utf8_walk(state: int, data: bytes) -> tuple[int, int]:
    """Characters `data` starts after `state`, and the state after it."""
    chars = 0
    for byte in data:
        if joins(state, byte):
            state = (state & 3) - 1  # later bytes of a sequence are 80..BF
        else:
            chars += 1
            state = opens(byte)
    return chars, state
