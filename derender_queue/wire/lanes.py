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
  if string.sub(v, 1, 1) == '#' then
    local nl = string.find(v, '\\n', 1, true)
    v = '#' .. (tonumber(string.sub(v, 2, nl - 1)) + 1) .. string.sub(v, nl)
  else
    v = '#2\\n' .. v
  end
  redis.call('RPUSH', KEYS[2], v)
  moved = moved + 1
end
redis.call('SREM', KEYS[3], KEYS[1])
return moved
"""
"""KEYS: a dead worker's active list, its lane, the shard's claims set.
Values go back to the front of the lane with their attempt number raised."""

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
local v = redis.call('GETRANGE', KEYS[1], 0, 0)
if v ~= 'P' then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""
"""KEYS: job. 1 if the job was pending (its result will never be written)."""


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
