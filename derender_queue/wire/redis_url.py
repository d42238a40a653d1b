"""Redis URLs: what DERENDER_REDIS_URL may be, what a Sentinel or Cluster URL
says, and where a URL points, said without its password.

    redis://[USER:PASSWORD@]HOST:PORT/DB          one server (rediss:// for TLS)
    redis+sentinel://[USER:PASSWORD@]H1:P1,H2:P2,.../MASTER[/DB][?sentinel_password=...]
    rediss+sentinel://...                         TLS to the sentinels and the master
    redis+cluster://[USER:PASSWORD@]H1:P1,H2:P2,...[/][?...]   a Redis Cluster: any of its
                                                  nodes (rediss+cluster:// for TLS); only
                                                  wire/cluster.py's clients take it

USER:PASSWORD authenticate to the master (an ACL user, as in redis://); the
sentinels' own credentials are the `sentinel_username` / `sentinel_password`
query parameters. Other query parameters are redis-py's (`socket_timeout`,
`ssl_ca_certs`, ...) and apply to the master's connections.

A URL that cannot work is refused at start-up in one line listing every form
(redis-py's own message names only its three schemes, in a traceback); where
a URL points is what `/ready` and start-up lines name when it does not answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qs, parse_qsl, unquote, urlsplit

from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS
from redis.connection import parse_url

FORMS = ("redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss:// (TLS), unix://[USER:PASSWORD@]/PATH[?db=DB], "
         "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB] (rediss+sentinel:// for TLS), "
         "redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...] (rediss+cluster:// for TLS)")
"""Every form a Redis URL takes here (the module docstring has their options)."""
PLAIN_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
"""Scheme -> TLS."""
SENTINEL_PORT = 26379
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
"""Scheme -> TLS."""
REDIS_PORT = 6379
CLUSTER_OPTIONS: dict[str, Any] = {
    **{name: parser for name, parser in URL_QUERY_ARGUMENT_PARSERS.items() if name not in ("db", "retry_on_timeout")},
    "ssl_ca_certs": str, "ssl_certfile": str, "ssl_keyfile": str, "ssl_cert_reqs": str,
    "require_full_coverage": URL_QUERY_ARGUMENT_PARSERS["ssl_check_hostname"],  # a boolean
    "reinitialize_steps": int, "cluster_error_retry_attempts": int, "connection_error_retry_attempts": int,
}
"""Query parameters a cluster URL takes: RedisCluster's, each with its parser."""
_SENTINEL_AUTH = {"sentinel_username": "username", "sentinel_password": "password"}


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


@dataclass(frozen=True)
class SentinelURL:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    """The master's name in the sentinels' configuration (`sentinel monitor NAME ...`)."""
    node: dict[str, Any] = field(default_factory=dict)
    """Connection arguments for the master: db, credentials, TLS, redis-py options."""
    sentinel: dict[str, Any] = field(default_factory=dict)
    """Connection arguments for the sentinels: their credentials and TLS."""


def parse_sentinel_url(url: str) -> SentinelURL:
    """`redis+sentinel://[U:P@]H1:P1,H2:P2/MASTER[/DB][?...]`; ValueError saying what is wrong."""
    parts, tls, sentinels, node = _split_url(
        url, SENTINEL_SCHEMES, "Sentinel", SENTINEL_PORT, "sentinel: redis+sentinel://HOST:PORT,.../MASTER")
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if not path or not path[0] or len(path) > 2:
        raise ValueError("a Sentinel URL's path is /MASTER or /MASTER/DB (the name in `sentinel monitor`)")
    node["db"] = _int(path[1], "database") if len(path) == 2 and path[1] else 0
    sentinel: dict[str, Any] = {}
    for name, values in parse_qs(parts.query).items():
        if name in _SENTINEL_AUTH:
            sentinel[_SENTINEL_AUTH[name]] = values[0]
        else:
            node[name] = _option(name, URL_QUERY_ARGUMENT_PARSERS.get(name, str), values[0])
    if tls:
        node["ssl"] = True
        sentinel.update(ssl=True, **{k: v for k, v in node.items() if k.startswith("ssl_")})
    return SentinelURL(sentinels, path[0], node, sentinel)


def _split_url(url: str, schemes: dict[str, bool], kind: str, default_port: int,
               example: str) -> tuple[SplitResult, bool, tuple[tuple[str, int], ...], dict[str, Any]]:
    """A Sentinel or Cluster URL's parts, whether it is TLS, its addresses
    and its credentials; ValueError saying what is wrong (`example`: what
    it names at least one of, and how)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise ValueError(f"not a {kind} URL ({' or '.join(f'{s}://' for s in schemes)}): {scheme}://")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    addresses = tuple(_host_port(item, default_port) for item in hosts.split(",") if item.strip())
    if not addresses:
        raise ValueError(f"a {kind} URL names at least one {example}")
    credentials: dict[str, Any] = {}
    user, has_password, password = userinfo.partition(":")
    if user:
        credentials["username"] = unquote(user)
    if has_password:
        credentials["password"] = unquote(password)
    return parts, schemes[scheme], addresses, credentials


def _option(name: str, parser: Any, value: str) -> Any:
    try:
        return parser(value)
    except (TypeError, ValueError):
        raise ValueError(f"invalid value for {name!r} in the Redis URL") from None


def _host_port(item: str, default_port: int) -> tuple[str, int]:
    item = item.strip()
    if item.startswith("["):  # [IPv6]:port
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise ValueError(f"an address without a host: {item!r}")
    return unquote(host), _int(port, "port") if port else default_port


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the {what} in the Redis URL is not a number: {text!r}") from None


@dataclass(frozen=True)
class ClusterURL:
    nodes: tuple[tuple[str, int], ...]
    """Where to ask for the cluster's layout: any of its nodes, one is enough."""
    options: dict[str, Any] = field(default_factory=dict)
    """RedisCluster's arguments: credentials, TLS, redis-py options."""


def parse_cluster_url(url: str) -> ClusterURL:
    """`redis+cluster://[U:P@]H1:P1,H2:P2[/][?...]`; ValueError saying what is wrong."""
    parts, tls, nodes, options = _split_url(
        url, CLUSTER_SCHEMES, "Cluster", REDIS_PORT, "node: redis+cluster://HOST:PORT,...")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has only database 0: leave the path out (or /0)")
    for name, values in parse_qs(parts.query).items():
        if name not in CLUSTER_OPTIONS:
            raise ValueError(f"a Cluster URL does not take {name!r} (it takes {', '.join(sorted(CLUSTER_OPTIONS))})")
        options[name] = _option(name, CLUSTER_OPTIONS[name], values[0])
    if tls:
        options["ssl"] = True
    return ClusterURL(nodes, options)


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
