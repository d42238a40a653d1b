"""Wire format v2: a job's lifecycle in four round trips (docs/wire-format.md).

    submit   producer  SET job "P"+envelope PX, LPUSH lane value   (one pipeline)
    claim    worker    BLMOVE lane -> its claim slot's active list (the value comes with it)
    finish   worker    EVALSHA finish: DEL active (the fence), SET job result XX PX, PUBLISH
    read     producer  the notification carries the result; DEL job once it is held

Every step touches keys of one shard's hash tag, so the same steps run on a
Redis Cluster. There is no per-job lease key, retry counter or queue ZSET: a
claim slot's active list is its lease, held while the worker's heartbeat
lives. When a heartbeat expires, any worker moves that worker's active values
back to the lane (`RECOVER`), marked with their attempt number, and the
finish of a worker that lost its claim finds its active list empty and writes
nothing: one result per job, whoever ran it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from .connection import in_memory
from .pacing import blocked
from .replication import Durability, NotReplicated

PENDING = b"P"
"""First byte of a pending job's key (a result value starts with "{")."""
ATTEMPT_MARK = b"#"
"""A recovered lane value starts "#<attempt>\\n" (a fresh one with "{")."""

FINISH = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if not redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'XX') then return 2 end
local channel = KEYS[3] or ARGV[3]
if channel ~= '' then
  local message = ARGV[5]
  if ARGV[4] == '1' then message = ARGV[5] .. '\\n' .. ARGV[1] end
  redis.call(ARGV[6] or 'PUBLISH', channel, message)
end
return 1
"""
"""KEYS: active, job, and on a Redis Cluster the shard channel (declared, so
it is in the script's slot). ARGV: result, TTL ms, channel ('' for none; the
declared one wins), inline (1/0), job id, and the publish command (PUBLISH by
default; SPUBLISH on a cluster). 0: the claim was lost (recovered by another
worker); 2: the job was withdrawn or expired (no result is written); 1:
written and announced."""

FINISH_LARGE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
if redis.call('DEL', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('DEL', KEYS[3]) return 2 end
redis.call('RENAME', KEYS[3], KEYS[2])
local channel = KEYS[4] or ARGV[1]
if channel ~= '' then redis.call(ARGV[3] or 'PUBLISH', channel, ARGV[2]) end
return 1
"""
"""`finish` for a result too large to announce (over 64 KiB): the worker SETs
it to KEYS[3] (the job's `out` key, PX = result TTL) in the same pipeline,
and this renames it onto the job key. A script copies its arguments, which
for a multi-megabyte result costs several times a SET beside the script
(bench/script_args.py times both). KEYS: active, job, out, and on a
Redis Cluster the shard channel. ARGV: channel ('' for none; the declared one
wins), job id, publish command. -1: the out key is missing (its SET failed:
nothing was changed, send both again); else as `finish`."""

RECOVER = """
local moved = 0
while true do
  local v = redis.call('RPOP', KEYS[1])
  if not v then break end
  local attempt = 2
  if string.sub(v, 1, 1) == '#' then
    local nl = string.find(v, '\\n', 1, true)
    attempt = tonumber(string.sub(v, 2, nl - 1)) + 1
    v = string.sub(v, nl + 1)
  end
  local mark = '#' .. attempt .. '\\n'
  if string.sub(v, 1, 1) == '*' then
    local nl = string.find(v, '\\n', 1, true)
    local pos = nl + 1
    local count = tonumber(string.sub(v, 2, nl - 1))
    redis.call('DECRBY', KEYS[4], count - 1)
    for _ = 1, count do
      local e = string.find(v, '\\n', pos, true)
      local size = tonumber(string.sub(v, pos, e - 1))
      redis.call('RPUSH', KEYS[2], mark .. string.sub(v, e + 1, e + size))  -- batched: small
      pos = e + 1 + size
      moved = moved + 1
    end
  else
    if #v > tonumber(ARGV[1]) then redis.call('RPUSH', KEYS[5], mark .. v)
    else redis.call('RPUSH', KEYS[2], mark .. v) end
    moved = moved + 1
  end
end
redis.call('SREM', KEYS[3], KEYS[1])
return moved
"""
"""KEYS: a dead worker's active list, its lane, the shard's claims set, the
lane's batched counter, its heavy lane. ARGV: the largest light job value's
size. Values go back to the front of their lane (a heavy one to the heavy
lane) with their attempt number raised; a batch goes back split, so one
poison item cannot take the others past DERENDER_MAX_TRIES with it. Returns
the jobs moved."""

FINISH_BATCH = """
local items = (#ARGV - 2) / 4
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('DECRBY', KEYS[2], items - 1)
local messages, order, written = {}, {}, {}
for i = 1, items do
  local b = 3 + (i - 1) * 4
  if redis.call('SET', KEYS[2 + i], ARGV[b], 'PX', ARGV[1], 'XX') then
    table.insert(written, i)
    local channel = ARGV[b + 1]
    if channel ~= '' then
      if not messages[channel] then messages[channel] = {'*'}; table.insert(order, channel) end
      if ARGV[b + 2] == '1' then
        table.insert(messages[channel], ARGV[b + 3] .. ' ' .. #ARGV[b] .. '\\n' .. ARGV[b])
      else
        table.insert(messages[channel], ARGV[b + 3] .. ' -1\\n')
      end
    end
  end
end
for _, channel in ipairs(order) do redis.call(ARGV[2], channel, table.concat(messages[channel])) end
return {1, unpack(written)}
"""
"""A batch's finish. KEYS: active, the lane's batched counter, each item's
job, then (on a Redis Cluster) each reply channel, declared so they are in
the script's slot. ARGV: TTL ms, the publish command (PUBLISH, or SPUBLISH on
a cluster), then per item: result, channel ('' for none), inline (1/0), job
id. One publish per reply channel carries all its items
(`envelope.parse_notifications`). 0: the claim was lost; else 1, then the
(1-based) items whose results it wrote (a withdrawn one's is not)."""

SUBMIT_ONCE = """
local bound = redis.call('GET', KEYS[1])
if bound then return bound end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[5])
return false
"""
"""KEYS: idempotency slot, job, lane. The slot's value when it is already bound."""

CANCEL = """
local head = redis.call('GETRANGE', KEYS[1], 0, 0)
redis.call('DEL', KEYS[1])
return head
"""
"""KEYS: job. Its first byte before it was deleted ("P": it was pending).
Only on a Redis Cluster, which has no MULTI; on one Redis a producer withdraws
with MULTI GETRANGE DEL, since its Redis user may run no scripts."""

BATCH_MARK = b"*"
"""A batch's lane value: "*<n>\\n", then per item "<length>\\n" and the job value."""


def pack_batch(values: list[bytes]) -> bytes:
    return BATCH_MARK + b"%d\n" % len(values) + b"".join(b"%d\n" % len(v) + v for v in values)


def unpack_batch(value: bytes) -> list[bytes]:
    """The job values of a batch's lane value (ValueError if it is not one)."""
    cut = value.index(b"\n")
    count, pos, items = int(value[1:cut]), cut + 1, []
    for _ in range(count):
        cut = value.index(b"\n", pos)
        size = int(value[pos:cut])
        items.append(value[cut + 1 : cut + 1 + size])
        pos = cut + 1 + size
    if pos != len(value):
        raise ValueError("a batch with bytes past its last item")
    return items


def split_attempt(value: bytes) -> tuple[int, bytes]:
    """(attempt, the job value) of a lane value."""
    if not value.startswith(ATTEMPT_MARK):
        return 1, value
    cut = value.index(b"\n")
    return int(value[1:cut]), value[cut + 1 :]


async def claim(client: Redis, lane: str, active: str, block_s: float) -> bytes | None:
    """The claim: move the lane's oldest value into a claim slot's `active`
    list and return it, blocking up to `block_s` for one (None: none came).
    On the embedded in-memory Redis it is BRPOPLPUSH, the same move: there
    BLMOVE answers at once instead of blocking (fakeredis 2.41)."""
    # Redis >= 6 takes a fractional timeout; redis-py's stubs say int.
    if in_memory(client):
        move = client.brpoplpush(lane, active, block_s)  # type: ignore[arg-type]
    else:
        move = client.blmove(lane, active, block_s, "RIGHT", "LEFT")  # type: ignore[arg-type]
    return await blocked(cast(Awaitable[bytes | None], move), block_s)


async def put_back(client: Redis, active: str, lane: str) -> None:
    """Undo a claim: the claim slot's value back to the end of the lane it is
    claimed from. (A failure leaves it in `active`, where a claim's value
    whose fate is unsure is read back from.)"""
    await cast(Awaitable[Any], client.lmove(active, lane, "LEFT", "RIGHT"))


def _where(redis: Redis, commands: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """On a Redis Cluster, WAIT (which has no key) goes to the master of the
    commands' slot, on their connection: it counts that connection's writes."""
    if not isinstance(redis, RedisCluster):
        return {}
    first = commands[0]
    key = first[3] if first[0] == "EVALSHA" else first[1]
    return {"target_nodes": redis.get_node_from_key(key)}


class Scripts:
    """v2's Lua scripts on one client (EVALSHA, loaded again after NOSCRIPT)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.finish: AsyncScript = redis.register_script(FINISH)
        self.finish_large: AsyncScript = redis.register_script(FINISH_LARGE)
        self.recover: AsyncScript = redis.register_script(RECOVER)
        self.finish_batch: AsyncScript = redis.register_script(FINISH_BATCH)
        self.submit_once: AsyncScript = redis.register_script(SUBMIT_ONCE)
        self.cancel: AsyncScript = redis.register_script(CANCEL)


async def replicated(redis: Redis, durability: Durability, commands: Sequence[tuple[Any, ...]],
                     script: AsyncScript | None = None) -> list[Any]:
    """`commands` in one pipeline on one connection, then WAIT for the replicas
    there (the writes are the connection's own). A command may be ("EVALSHA",
    script.sha, ...): NOSCRIPT loads `script` and sends them again."""
    for loaded in (False, True):
        async with redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            if durability.replicas:
                pipe.execute_command("WAIT", durability.replicas, durability.timeout_ms, **_where(redis, commands))
            try:
                replies = await pipe.execute()
            except NoScriptError:
                if script is None or loaded:
                    raise
                await redis.script_load(script.script)
                continue
        if durability.replicas:
            acked = int(replies.pop())
            if acked < durability.replicas:
                raise NotReplicated(acked, durability.replicas, durability.timeout_ms)
        return list(replies)
    raise AssertionError("unreachable")
