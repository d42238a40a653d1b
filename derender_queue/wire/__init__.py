"""How jobs and results travel through Redis, in both wire formats: v2 (the
default: lanes, claim slots, Lua scripts) and v1 (a sorted-set queue), which
every worker still serves. Imports neither tokenizers nor arq.

    `keys`            every key name of a deployment prefix
    `envelope`        job, result and notification values
    `queue`           producer operations (v1, and the dispatch by job id)
    `queue_v2`        v2's producer side and dynamic batching
    `lanes`           v2's Lua scripts (finish, recover, idempotent submit), batch frames
    `waiter`          waiting for results on one pub/sub subscription per process
    `client`          the Python producer client (public path `derender_queue.wire.client`)
    `streaming`       streaming derender for Python producers
    `heartbeat`       worker liveness and the counters the status page shows
    `activity`        each worker's last minute, per second, for the status page
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
