#!/bin/sh
# One Redis Sentinel of docker-compose.yml's `sentinel` profile (docs/sentinel.md).
# Writes its configuration on first start only: a sentinel rewrites that file as it learns
# the topology (failovers, replicas, the other sentinels), so a restart keeps what it knows.
#
# Environment (docker-compose.yml sets it; the defaults are the compose values):
#   SENTINEL_NAME        this sentinel's host name, announced to the other sentinels
#   SENTINEL_PORT        26379
#   MASTER_NAME          the name clients ask for (DERENDER_REDIS_URL's /MASTER): derender
#   MASTER_HOST          the master to monitor on first start: redis (port MASTER_PORT)
#   QUORUM               sentinels that must agree the master is down: 2 (of 3)
#   DOWN_AFTER_MS        a master silent this long is down: 5000 (Redis's default is 30000)
#   FAILOVER_TIMEOUT_MS  30000
#   CONFIG               /data/sentinel.conf
#   BIND                 listen address (unset: every interface, as in a container)
set -eu
: "${SENTINEL_PORT:=26379}" "${MASTER_NAME:=derender}" "${MASTER_HOST:=redis}" "${MASTER_PORT:=6379}"
: "${QUORUM:=2}" "${DOWN_AFTER_MS:=5000}" "${FAILOVER_TIMEOUT_MS:=30000}" "${CONFIG:=/data/sentinel.conf}"
: "${SENTINEL_NAME:?SENTINEL_NAME is this sentinel's host name}"
if [ ! -s "$CONFIG" ]; then
  cat > "$CONFIG" <<CONF
port $SENTINEL_PORT
${BIND:+bind $BIND}
protected-mode no
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $SENTINEL_NAME
sentinel announce-port $SENTINEL_PORT
sentinel monitor $MASTER_NAME $MASTER_HOST $MASTER_PORT $QUORUM
sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER_MS
sentinel failover-timeout $MASTER_NAME $FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $MASTER_NAME 1
CONF
fi
exec redis-server "$CONFIG" --sentinel
