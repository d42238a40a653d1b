"""Wire format v2: a job's lifecycle in four round trips (README "Wire format v2").

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

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from .replication import Durability, NotReplicated

PENDING = b"P"
"""First byte of a pending job's key (a result value starts with "{")."""
ATTEMPT_MARK = b"#"
"""A recovered lane value starts "#<attempt>\\n" (a fresh one with "{")."""

FINISH = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if not redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'XX') then return 2 end
if ARGV[3] ~= '' then
  if ARGV[4] == '1' then redis.call('PUBLISH', ARGV[3], ARGV[5] .. '\\n' .. ARGV[1])
  else redis.call('PUBLISH', ARGV[3], ARGV[5]) end
end
return 1
"""
"""KEYS: active, job. ARGV: result, TTL ms, channel ('' for none), inline (1/0), job id.
0: the claim was lost (recovered by another worker); 2: the job was withdrawn
or expired (no result is written); 1: written and announced."""

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
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('DECRBY', KEYS[2], #KEYS - 3)
local messages, order, written = {}, {}, 0
for i = 3, #KEYS do
  local b = 2 + (i - 3) * 4
  if redis.call('SET', KEYS[i], ARGV[b], 'PX', ARGV[1], 'XX') then
    written = written + 1
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
for _, channel in ipairs(order) do redis.call('PUBLISH', channel, table.concat(messages[channel])) end
return written + 1
"""
"""A batch's finish. KEYS: active, the lane's batched counter, then each
item's job. ARGV: TTL ms, then per item: result, channel ('' for none),
inline (1/0), job id. One PUBLISH per
reply channel carries all its items (`envelope.parse_notifications`).
0: the claim was lost; else 1 + the results written (withdrawn items are not)."""

SUBMIT_ONCE = """
local bound = redis.call('GET', KEYS[1])
if bound then return bound end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[5])
return false
"""
"""KEYS: idempotency slot, job, lane. The slot's value when it is already bound."""

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


class Scripts:
    """v2's Lua scripts on one client (EVALSHA, loaded again after NOSCRIPT)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.finish: AsyncScript = redis.register_script(FINISH)
        self.recover: AsyncScript = redis.register_script(RECOVER)
        self.finish_batch: AsyncScript = redis.register_script(FINISH_BATCH)
        self.submit_once: AsyncScript = redis.register_script(SUBMIT_ONCE)


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
                pipe.execute_command("WAIT", durability.replicas, durability.timeout_ms)
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
