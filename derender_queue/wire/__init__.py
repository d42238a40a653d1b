"""How jobs and results travel through Redis: wire format v2 (lanes, claim
slots, Lua scripts; v1 was removed in 0.2.0). Imports neither tokenizers nor arq.

    `keys`            every key name of a deployment prefix
    `envelope`        job, result and notification values
    `queue`           producer operations: submit (dynamic batching), idempotency, withdraw, read
    `lanes`           v2's Lua scripts (finish, recover, idempotent submit, settle)
    `frames`          lane value headers (batch frames, attempt marks) read with bounds
    `depth`           queue depth, the batched counter read within what a lane can hold
    `waiter`          waiting for results on one pub/sub subscription per process
    `client`          the Python producer client (public path `derender_queue.wire.client`)
    `streaming`       streaming derender for Python producers
    `sse_lines`       a generate stage's SSE read line by line (the SSE route's rule too)
    `heartbeat`       worker liveness and the counters the status page shows
    `activity`        each worker's last minute, per second, for the status page
    `held_text`       streams' held text past 512 characters (core/parsers/spill.py's I/O)
    `connection`      one URL: a single server, a Sentinel-managed master or a Cluster
    `redis_url`       which URL forms are accepted; where a URL points, without its password
    `pacing`          backoff for reconnect loops; blocking calls that answer early never spin
    `failures`        what counts as a failed Redis call, whatever its exception type
    `background`      background tasks that log, count and restart instead of dying quietly
    `cluster`         Redis Cluster clients, slot map and shard tags
    `sharded_pubsub`  SSUBSCRIBE over a Redis Cluster
    `replication`     durable writes (WAIT, DERENDER_MIN_REPLICAS)
    `big_replies`     reading multi-megabyte replies past hiredis
"""
