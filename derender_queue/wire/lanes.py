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
from .frames import ATTEMPT_MARK, BATCH_MARK, FRAME_ITEMS, LUA_FIELD, LUA_TAKE, split_attempt, unpack_batch
from .pacing import blocked
from .replication import Durability, NotReplicated

__all__ = ["ATTEMPT_MARK", "BATCH_MARK", "split_attempt", "unpack_batch"]  # read with bounds in frames.py
PENDING = b"P"
"""First byte of a pending job's key (a result value starts with "{")."""

FINISH = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if not redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'XX') then return 2 end
local channel = KEYS[3] or ARGV[3]
if channel ~= '' then
  local message = ARGV[5]
  if ARGV[4] == '1' then message = ARGV[5] .. '\\n' .. ARGV[1] end
  if type(redis.pcall(ARGV[6] or 'PUBLISH', channel, message)) ~= 'number' then return 3 end
end
return 1
"""
"""KEYS: active, job, and on a Redis Cluster the shard channel (declared, so
it is in the script's slot). ARGV: result, TTL ms, channel ('' for none; the
declared one wins), inline (1/0), job id, and the publish command (PUBLISH by
default; SPUBLISH on a cluster). 0: the claim was lost (recovered by another
worker); 2: the job was withdrawn or expired (no result is written); 1:
written and announced; 3: written, but the publish failed (the worker
announces it again). Nothing after the fence's DEL can fail (a script's
writes stay when it errors: an error there would lose the claim)."""

FINISH_LARGE = """
if redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
if redis.call('DEL', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('DEL', KEYS[3]) return 2 end
redis.call('RENAME', KEYS[3], KEYS[2])
local channel = KEYS[4] or ARGV[1]
if channel ~= '' and type(redis.pcall(ARGV[3] or 'PUBLISH', channel, ARGV[2])) ~= 'number' then return 3 end
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

RECOVER = LUA_FIELD + LUA_TAKE + f"""
local moved, dropped, counted = 0, 0, 0
while true do
  local v = redis.call('RPOP', KEYS[1])
  if not v then break end
  local attempt = 2
  if string.sub(v, 1, 1) == '#' then
    local n, pos = field(v, 2)
    if n then attempt = n + 1; v = string.sub(v, pos) else v = nil end
  end
  if not v then
    dropped = dropped + 1
  elseif string.sub(v, 1, 1) == '*' then
    local mark = '#' .. attempt .. '\\n'
    local count, pos = field(v, 2)
    local items = 0
    if count then
      counted = counted + math.max(math.min(count, {FRAME_ITEMS}) - 1, 0)
      while items < math.min(count, {FRAME_ITEMS}) do
        local size, start = field(v, pos)
        if not size or size > #v - start + 1 then break end
        redis.call('RPUSH', KEYS[2], mark .. string.sub(v, start, start + size - 1))  -- batched: small
        pos = start + size
        items = items + 1
      end
    end
    if not count or items < count or pos <= #v then dropped = dropped + 1 end
    moved = moved + items
  else
    local mark = '#' .. attempt .. '\\n'
    if #v > tonumber(ARGV[1]) then redis.call('RPUSH', KEYS[5], mark .. v)
    else redis.call('RPUSH', KEYS[2], mark .. v) end
    moved = moved + 1
  end
end
take(KEYS[4], counted)
redis.call('SREM', KEYS[3], KEYS[1])
return {{moved, dropped}}
"""
"""KEYS: a dead worker's active list, its lane, the shard's claims set, the
lane's batched counter, its heavy lane. ARGV: the largest light job value's
size. Values go back to the front of their lane (a heavy one to the heavy
lane) with their attempt number raised; a batch goes back split, so one
poison item cannot take the others past DERENDER_MAX_TRIES with it. Headers
are read with frames.py's bounds: a frame gives back the items before its
first bad field (at most FRAME_ITEMS), and a value with a bad header or
bytes past its items is counted as dropped (its bytes beyond the items are
gone). Returns {jobs moved, values dropped}."""

FINISH_BATCH = LUA_TAKE + """
local items = (#ARGV - 3) / 4
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
local messages, order, written = {}, {}, {}
for i = 1, items do
  local b = 4 + (i - 1) * 4
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
take(KEYS[2], tonumber(ARGV[3]))
local status = 1
for _, channel in ipairs(order) do
  if type(redis.pcall(ARGV[2], channel, table.concat(messages[channel]))) ~= 'number' then status = 3 end
end
return {status, unpack(written)}
"""
"""A batch's finish. KEYS: active, the lane's batched counter, each item's
job, then (on a Redis Cluster) each reply channel, declared so they are in
the script's slot. ARGV: TTL ms, the publish command (PUBLISH, or SPUBLISH on
a cluster), the jobs to take off the counter (the frame's `counted` - 1), then
per item: result, channel ('' for none), inline (1/0), job id. One publish
per reply channel carries all its items (`envelope.parse_notifications`).
0: the claim was lost; else 1 (3: a publish failed, announce again), then
the (1-based) items whose results it wrote (a withdrawn one's is not).
Nothing after the fence's DEL can fail: the counter, which producers can set
to anything, is taken down by `take` (never an error)."""

SETTLE = f"""
local held = 0
for i = 3, #KEYS do held = held + redis.call('LLEN', KEYS[i]) end
local most = {FRAME_ITEMS - 1} * (redis.call('LLEN', KEYS[1]) + held)
local n = redis.pcall('GET', KEYS[2])
if type(n) == 'string' and string.match(n, '^%d+$') and tonumber(n) <= most then return tonumber(n) end
if n == false then return 0 end
if type(n) == 'string' and string.match(n, '^%d+$') then redis.call('SET', KEYS[2], most) return most end
redis.call('SET', KEYS[2], 0)
return 0
"""
"""Bring a lane's batched counter into the range its values allow: each value
in the lane or in a claim slot of the model (KEYS[3:]) counts at most
FRAME_ITEMS - 1 jobs beyond itself. KEYS: lane, batched counter, the model's
active lists in the shard. Producers may INCRBY the counter (docs/security.md)
to any value: one above the range comes down to its top, one below zero
(or not a number) to 0; a count made too low by a submit in flight heals as
its batch is finished (`take` stops at 0). Returns the counter."""

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

def pack_batch(values: list[bytes]) -> bytes:
    return BATCH_MARK + b"%d\n" % len(values) + b"".join(b"%d\n" % len(v) + v for v in values)


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
        self.finish: AsyncScript = redis.register_script(FINISH)
        self.finish_large: AsyncScript = redis.register_script(FINISH_LARGE)
        self.recover: AsyncScript = redis.register_script(RECOVER)
        self.finish_batch: AsyncScript = redis.register_script(FINISH_BATCH)
        self.submit_once: AsyncScript = redis.register_script(SUBMIT_ONCE)
        self.cancel: AsyncScript = redis.register_script(CANCEL)
        self.settle: AsyncScript = redis.register_script(SETTLE)


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
