#!/bin/sh
# The Redis replica of docker-compose.yml's `sentinel` profile (docs/sentinel.md).
# Before it starts it asks the sentinels where the master is now (after a failover that is
# no longer MASTER_HOST), and it never comes back as the master itself: when the sentinels
# still name this node (it was promoted, crashed and was restarted before they noticed), it
# waits for them to promote the other node, whose copy may hold acknowledged writes this
# one lost, and then replicates that. With no sentinel up yet (first start): MASTER_HOST.
#
# Environment (docker-compose.yml sets it; the defaults are the compose values):
#   NODE_NAME     this node's host name, announced to the master: redis-replica
#   PORT          6379
#   MASTER_HOST   the master on first start: redis (port MASTER_PORT)
#   MASTER_NAME   the name the sentinels monitor: derender
#   SENTINELS     "host:port ..." of the sentinels
#   APPENDFSYNC, MAXMEMORY, DIR   as the master's (append-only file, noeviction)
#   BIND          listen address (unset: every interface, as in a container)
set -eu
: "${NODE_NAME:=redis-replica}" "${PORT:=6379}" "${MASTER_HOST:=redis}" "${MASTER_PORT:=6379}"
: "${MASTER_NAME:=derender}" "${SENTINELS:=sentinel-1:26379 sentinel-2:26379 sentinel-3:26379}"
: "${APPENDFSYNC:=everysec}" "${MAXMEMORY:=1gb}" "${DIR:=/data}"

master() {  # "host port" as the first sentinel that answers names it; nothing if none does
  for sentinel in $SENTINELS; do
    if answer=$(redis-cli -h "${sentinel%:*}" -p "${sentinel##*:}" --raw \
                SENTINEL get-master-addr-by-name "$MASTER_NAME" 2>/dev/null) && [ -n "$answer" ]; then
      echo "$answer" | tr '\n' ' '
      return 0
    fi
  done
}

set -- $(master)
while [ "${1:-}" = "$NODE_NAME" ] && [ "${2:-}" = "$PORT" ]; do
  echo "the sentinels still name this node the master: waiting for them to promote the other" >&2
  sleep 1
  set -- $(master)
done
exec redis-server --port "$PORT" ${BIND:+--bind "$BIND"} --protected-mode no --appendonly yes --appendfsync "$APPENDFSYNC" --save "" \
  --maxmemory "$MAXMEMORY" --maxmemory-policy noeviction --dir "$DIR" --repl-diskless-sync-delay 0 \
  --replica-announce-ip "$NODE_NAME" --replica-announce-port "$PORT" \
  --replicaof "${1:-$MASTER_HOST}" "${2:-$MASTER_PORT}"
