"""The headers a lane value may carry, read with bounds (docs/wire-format.md).

A lane value is a job value, a batch frame ("*<n>\\n", then per item
"<length>\\n" and the job value), or either behind an attempt mark
("#<attempt>\\n", written by RECOVER). Producers write lanes directly, so a
header can say anything: "*12000000\\n-3\\n" once made the worker build 12
million items (stepping back 3 bytes each) and RECOVER push 12 million junk
values. So every header field is read here, in Python and in Lua, the same
way: at most `FIELD_DIGITS` decimal digits and a newline, found within the
next `FIELD_DIGITS + 1` bytes; an item count is capped at `FRAME_ITEMS`, and
an item's length must fit in what is left of the value. Checking a header
costs O(1) per field, and a frame is never read past its `FRAME_ITEMS` items.
A frame that breaks a bound yields the items before the break (each job
among them is answered) and a problem to count and log, never its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

ATTEMPT_MARK = b"#"
"""A recovered lane value starts "#<attempt>\\n" (a fresh one with "{")."""
BATCH_MARK = b"*"
"""A batch's lane value: "*<n>\\n", then per item "<length>\\n" and the job value."""
FRAME_ITEMS = 64
"""The most items a frame holds (producers batch at most this many jobs)."""
FIELD_DIGITS = 10
"""The most digits of a header field (an attempt, a count, a length)."""


@dataclass(frozen=True)
class Frame:
    """A batch frame's items, and what was wrong with it (None: nothing)."""

    items: list[bytes]
    problem: str | None = None
    counted: int = 1
    """Jobs its producer counted in the lane's batched counter: its declared
    item count up to `FRAME_ITEMS` (its finish takes `counted - 1` off)."""


def read_field(value: bytes, pos: int) -> tuple[int, int] | None:
    """(the decimal field at `pos`, the position after its newline), or None
    when no field of at most FIELD_DIGITS digits and a newline starts there."""
    cut = value.find(b"\n", pos, pos + FIELD_DIGITS + 1)
    if cut <= pos:
        return None
    digits = value[pos:cut]
    return (int(digits), cut + 1) if digits.isdigit() else None


def unpack_batch(value: bytes) -> Frame:
    """The job values of a batch frame: at most FRAME_ITEMS, each within the
    value; anything else is the frame's problem."""
    head = read_field(value, 1)
    if head is None:
        return Frame([], "no item count")
    count, pos = head
    items: list[bytes] = []
    while len(items) < min(count, FRAME_ITEMS):
        field = read_field(value, pos)
        if field is None or field[0] > len(value) - field[1]:
            return Frame(items, f"item {len(items) + 1} of {count} has no length within the frame",
                         min(count, FRAME_ITEMS))
        size, start = field
        items.append(value[start : start + size])
        pos = start + size
    if count > FRAME_ITEMS:
        problem: str | None = f"{count} items, over {FRAME_ITEMS}"
    elif pos != len(value):
        problem = f"{len(value) - pos} bytes past its last item"
    else:
        problem = None if count else "no items"
    return Frame(items, problem, max(min(count, FRAME_ITEMS), 1))


def split_attempt(value: bytes) -> tuple[int, bytes]:
    """(attempt, the job value) of a lane value (ValueError: a bad mark)."""
    if not value.startswith(ATTEMPT_MARK):
        return 1, value
    field = read_field(value, 1)
    if field is None:
        raise ValueError("an attempt mark without a valid attempt number")
    return field[0], value[field[1] :]


LUA_FIELD = f"""
local function field(v, pos)
  local nl = string.find(string.sub(v, pos, pos + {FIELD_DIGITS}), '\\n', 1, true)
  if not nl or nl == 1 then return nil end
  local digits = string.sub(v, pos, pos + nl - 2)
  if not string.match(digits, '^%d+$') then return nil end
  return tonumber(digits), pos + nl
end
"""
"""`read_field` in Lua, for the scripts that read lane values."""

LUA_TAKE = """
local function take(key, n)
  if n <= 0 then return end
  local left = redis.pcall('DECRBY', key, n)
  if type(left) ~= 'number' or left < 0 then redis.call('SET', key, 0) end
end
"""
"""Take `n` off a lane's batched counter, which producers can INCRBY to any
value: never an error (an overflow or a wrong type leaves 0), never below 0."""
