"""Lane value headers read with bounds (wire/frames.py; issue 31 item 8):
whatever bytes follow a frame's "*", reading it never raises, never builds
more than FRAME_ITEMS items, and every item is bytes of the value; a frame
packed by a producer reads back as packed; RECOVER (Lua) splits every frame
into the same items as the worker (Python) reads from it."""

from __future__ import annotations

import asyncio
import random

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from derender_queue.wire.frames import FRAME_ITEMS, read_field, split_attempt, unpack_batch
from derender_queue.wire.lanes import Scripts, pack_batch
from tests.helpers.redis_process import RedisProcess

items = st.lists(st.binary(max_size=40), min_size=1, max_size=FRAME_ITEMS)


@given(items)
def test_a_packed_frame_reads_back_as_packed(values):
    frame = unpack_batch(pack_batch(values))
    assert (frame.items, frame.problem, frame.counted) == (values, None, len(values))


@given(st.binary(max_size=300))
def test_any_bytes_after_the_mark_read_within_bounds(tail):
    frame = unpack_batch(b"*" + tail)
    assert len(frame.items) <= FRAME_ITEMS and 1 <= frame.counted <= FRAME_ITEMS
    assert all(item in tail for item in frame.items)


@given(items, st.binary(min_size=1, max_size=20))
def test_a_frame_with_bytes_past_its_items_keeps_its_items_and_says_so(values, junk):
    frame = unpack_batch(pack_batch(values) + junk)
    assert frame.items == values and frame.problem


@pytest.mark.parametrize("field", [b"", b"-3\n", b"12345678901\n", b"1e3\n", b" 3\n", b"3"])
def test_a_field_is_digits_and_a_newline_within_eleven_bytes(field):
    assert read_field(b"*" + field, 1) is None


def test_an_attempt_mark_is_read_with_the_same_bounds():
    assert split_attempt(b"#3\n{}") == (3, b"{}")
    for bad in (b"#x\n{}", b"#-1\n{}", b"#99999999999\n{}", b"#3"):
        with pytest.raises(ValueError):
            split_attempt(bad)


def frames(seed: int) -> list[bytes]:
    """Valid frames, and frames cut, padded or with a field changed at random."""
    rng = random.Random(seed)
    out = []
    for _ in range(60):
        values = [rng.randbytes(rng.randrange(0, 30)) for _ in range(rng.randrange(1, 70))]
        frame = bytearray(pack_batch(values))
        change = rng.randrange(5)
        if change == 1:
            frame = frame[: rng.randrange(1, len(frame))]
        elif change == 2:
            frame += rng.randbytes(rng.randrange(1, 10))
        elif change == 3:
            at = rng.randrange(1, len(frame))
            frame[at : at + 1] = rng.choice([b"-", b"\n", b"9", b"x"])
        out.append(bytes(frame))
    return out


def test_recover_splits_every_frame_as_the_worker_reads_it():
    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    values = frames(20261206)

    async def recovered(value: bytes) -> list[bytes]:
        client = redis.asyncio.Redis.from_url(server.url)
        try:
            await client.delete("lane")
            await client.rpush("active", b"#1\n" + value)
            await Scripts(client).recover(keys=["active", "lane", "claims", "batched", "heavy"], args=[32768])
            return [split_attempt(v)[1] for v in await client.lrange("lane", 0, -1)]
        finally:
            await client.aclose()

    try:
        for value in values:
            assert sorted(asyncio.run(recovered(value))) == sorted(unpack_batch(value).items), value[:80]
    finally:
        server.close()
