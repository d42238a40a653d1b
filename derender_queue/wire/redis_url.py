"""What DERENDER_REDIS_URL may be, and where it points, said without its password.

A URL that cannot work is refused at start-up in one line listing every form
(redis-py's own message names only its three schemes, in a traceback); where
a URL points is what `/ready` and start-up lines name when it does not answer.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from redis.connection import parse_url

from .connection import CLUSTER_SCHEMES, SENTINEL_SCHEMES, parse_cluster_url, parse_sentinel_url

FORMS = ("redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss:// (TLS), unix://[USER:PASSWORD@]/PATH[?db=DB], "
         "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB] (rediss+sentinel:// for TLS), "
         "redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...] (rediss+cluster:// for TLS)")
"""Every form a Redis URL takes here (wire/connection.py has their options)."""
PLAIN_SCHEMES = ("redis", "rediss", "unix")


def check_redis_url(url: str) -> None:
    """ValueError saying what is wrong with `url`, and every accepted form."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    try:
        if scheme in SENTINEL_SCHEMES:
            parse_sentinel_url(url)
        elif scheme in CLUSTER_SCHEMES:
            parse_cluster_url(url)
        elif scheme in PLAIN_SCHEMES:
            parse_url(url)  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated
        else:
            raise ValueError(f"unknown scheme {scheme + '://'!r}" if scheme else "no scheme (such as redis://)")
    except ValueError as exc:
        raise ValueError(f"{str(exc).rstrip('.')}; accepted forms: {FORMS}") from None


def redacted(url: str) -> str:
    """`url` with its credentials (user info, `*password*` parameters) masked."""
    head, at, tail = url.rpartition("@")
    if at:
        scheme, slashes, _ = head.rpartition("//")
        url = f"{scheme}{slashes}***@{tail}"
    base, mark, query = url.partition("?")
    if not mark:
        return url
    pairs = [f"{k}={'***' if 'password' in k.lower() else v}" for k, v in parse_qsl(query, keep_blank_values=True)]
    return f"{base}?{'&'.join(pairs)}"


def redis_address(url: str) -> str:
    """Where `url` points, for an operator: `host:port` (a socket path; for
    Sentinel the master's name and its sentinels, for a Cluster its nodes)."""
    scheme = url.partition("://")[0].lower()
    try:
        if scheme in SENTINEL_SCHEMES:
            target = parse_sentinel_url(url)
            return f"master {target.service!r} via sentinels {_hosts(target.sentinels)}"
        if scheme in CLUSTER_SCHEMES:
            return f"cluster nodes {_hosts(parse_cluster_url(url).nodes)}"
        if scheme == "unix":
            return urlsplit(url).path
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        return f"{f'[{host}]' if ':' in host else host}:{parts.port or 6379}"
    except ValueError:
        return redacted(url)


def _hosts(addresses: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{host}:{port}" for host, port in addresses)
