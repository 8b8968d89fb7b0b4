"""How this process reaches Redis: one server (`redis://`, `rediss://`) or a Sentinel group,
with TLS, as the settings say.

The store, the events follower, recovery and the Celery broker all connect through a
`RedisTarget`, so they reach the same server the same way. `check` turns what only a person
can fix (a certificate that does not verify, a wrong password, a master name the sentinels
do not know) into one line at start, instead of a traceback at the first job.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.sentinel
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from pipelines.errors import ConfigError
from workers.broker import transport as broker_transport
from workers.core.settings import Settings

SENTINEL_PORT = 26379
CHECK_TIMEOUT = 5.0
# TLS options a redis(s):// URL may carry in its query, as redis-py reads them.
_TLS_QUERY = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs")
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class Tls:
    """Verify the server against `ca_certs` (None: the system's CAs); present a client
    certificate when `certfile` is given."""

    ca_certs: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    cert_reqs: str = "required"

    def redis_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of a redis-py connection."""
        return {
            "ssl": True,
            "ssl_cert_reqs": self.cert_reqs,
            "ssl_ca_certs": self.ca_certs,
            "ssl_certfile": self.certfile,
            "ssl_keyfile": self.keyfile,
        }

    def celery(self) -> dict[str, Any]:
        """Celery's `broker_use_ssl`. Without it kombu connects to a rediss:// URL with
        verification turned off (CERT_NONE), whatever the URL says."""
        return {
            "ssl_cert_reqs": _CERT_REQS[self.cert_reqs],
            "ssl_ca_certs": self.ca_certs,
            "ssl_certfile": self.certfile,
            "ssl_keyfile": self.keyfile,
        }


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """One Redis server by URL, or the master of a Sentinel group.

    With sentinels, `url` gives only the scheme (rediss: TLS), user, password and database
    of the master; its host is not used (by convention, the master's name).
    """

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = "mymaster"
    sentinel_password: str = ""
    tls: Tls | None = None
    transport_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings, url: str | None = None) -> RedisTarget:
        """The target `url` names (default: MCP_MEDIA_REDIS_URL), with the settings' TLS
        files, sentinels and transport options."""
        url = url or settings.redis_url
        if not url:
            raise ConfigError("no Redis URL: set MCP_MEDIA_REDIS_URL or MCP_MEDIA_REDIS_SENTINELS")
        sentinels = tuple(parse_hostport(s) for s in settings.redis_sentinels)
        if url.startswith("sentinel://"):  # Celery's spelling, as app.conf.broker_url holds it
            found, url = split_sentinel_url(url)
            sentinels = sentinels or found
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ConfigError(
                f"MCP_MEDIA_REDIS_URL must start with redis://, rediss:// or sentinel://, "
                f"not {parts.scheme}://"
            )
        query = dict(parse_qsl(parts.query))
        given = {name: query.pop(name, None) for name in _TLS_QUERY}
        ca = settings.redis_ca_certs or given["ssl_ca_certs"]
        cert = settings.redis_certfile or given["ssl_certfile"]
        key = settings.redis_keyfile or given["ssl_keyfile"]
        tls = None
        if parts.scheme == "rediss" or ca or cert or key or given["ssl_cert_reqs"]:
            reqs = (given["ssl_cert_reqs"] or "required").lower()
            if reqs not in _CERT_REQS:
                raise ConfigError(f"ssl_cert_reqs={reqs!r}: choose none, optional or required")
            tls = Tls(_str(ca), _str(cert), _str(key), reqs)
        scheme = "rediss" if tls else "redis"
        netloc = parts.netloc
        if sentinels:  # the master's host is whatever the sentinels say: name it by its name
            creds = netloc.rpartition("@")[0]
            netloc = (
                f"{creds}@{settings.redis_master_name}" if creds else settings.redis_master_name
            )
        url = urlunsplit((scheme, netloc, parts.path, urlencode(query), ""))
        return cls(
            url=url,
            sentinels=sentinels,
            master_name=settings.redis_master_name,
            sentinel_password=settings.redis_sentinel_password.get_secret_value(),
            tls=tls,
            transport_options=dict(settings.redis_transport_options),
        )

    # what it is

    @property
    def username(self) -> str | None:
        name = urlsplit(self.url).username
        return unquote(name) if name else None

    @property
    def password(self) -> str | None:
        word = urlsplit(self.url).password
        return unquote(word) if word else None

    @property
    def db(self) -> int:
        path = urlsplit(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    def where(self) -> str:
        """What to print: the URL with its password masked, or the sentinel group."""
        if self.sentinels:
            hosts = ",".join(f"{h}:{p}" for h, p in self.sentinels)
            return f"master {self.master_name!r} of sentinels {hosts}"
        return mask(self.url)

    # connections

    def client(self, **options: Any) -> redis.Redis[bytes]:
        """A redis-py client of the server (with sentinels: of the current master, found
        again after a failover). `options` are redis-py connection options."""
        kwargs = dict(self.tls.redis_kwargs()) if self.tls else {}
        kwargs.update(options)
        if not self.sentinels:
            kwargs.pop("ssl", None)  # the rediss:// scheme says it
            return redis.Redis.from_url(self.url, **kwargs)
        manager = redis.sentinel.Sentinel(
            list(self.sentinels), sentinel_kwargs=self._sentinel_kwargs(options), **kwargs
        )
        client: redis.Redis[bytes] = manager.master_for(
            self.master_name,
            username=self.username,
            password=self.password,
            db=self.db,
        )
        return client

    def _sentinel_kwargs(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The sentinels themselves: reached as the master is (TLS or not), with their own
        password, and the same socket timeouts."""
        kwargs = {k: v for k, v in options.items() if k.startswith("socket_")}
        if self.tls:
            kwargs.update(self.tls.redis_kwargs())
        if self.sentinel_password:
            kwargs["password"] = self.sentinel_password
        return kwargs

    def celery_url(self) -> str:
        """The broker URL for Celery: the server's, or kombu's `sentinel://a;sentinel://b`
        (the first carries the master's credentials and database). TLS options ride in the
        query, where kombu reads them, and so does `of` when a worker builds its store from
        `app.conf.broker_url`."""
        query = self._tls_query()
        if not self.sentinels:
            parts = urlsplit(self.url)
            both = "&".join(q for q in (parts.query, query) if q)
            return urlunsplit((parts.scheme, parts.netloc, parts.path, both, ""))
        creds = urlsplit(self.url).netloc.rpartition("@")[0]
        first = f"{creds}@" if creds else ""
        tail = f"?{query}" if query else ""
        return ";".join(
            f"sentinel://{first}{_host(h)}:{p}/{self.db}{tail}"
            if i == 0
            else f"sentinel://{_host(h)}:{p}"
            for i, (h, p) in enumerate(self.sentinels)
        )

    def _tls_query(self) -> str:
        if self.tls is None:
            return ""
        named = {
            "ssl_cert_reqs": self.tls.cert_reqs,
            "ssl_ca_certs": self.tls.ca_certs,
            "ssl_certfile": self.tls.certfile,
            "ssl_keyfile": self.tls.keyfile,
        }
        return urlencode({k: v for k, v in named.items() if v})

    def celery_conf(self, transport_options: Mapping[str, Any]) -> dict[str, Any]:
        """`broker_url`, `broker_transport`, `broker_use_ssl` and `broker_transport_options`
        for Celery; the settings' transport options are laid over `transport_options`."""
        options = dict(transport_options)
        if self.sentinels:
            options["master_name"] = self.master_name
            options["sentinel_kwargs"] = self._sentinel_kwargs({})
        options.update(self.transport_options)
        return {
            "broker_url": self.celery_url(),
            "broker_transport": broker_transport.SENTINEL
            if self.sentinels
            else broker_transport.REDIS,
            "broker_use_ssl": self.tls.celery() if self.tls else False,
            "broker_transport_options": options,
        }

    # start-up check

    def check(self, timeout: float = CHECK_TIMEOUT) -> None:
        """Raise a one-line ConfigError for what only a person can fix: certificates,
        credentials, permissions, a master name the sentinels do not know. A server that
        does not answer (yet) is not an error here: clients retry."""
        for name, value in self._tls_files():
            if not Path(value).is_file():
                raise ConfigError(f"{name}={value}: no such file")
        if self.sentinels:
            self._check_sentinels(timeout)
        probe = self.client(socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            probe.ping()
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
            problem = explain(exc)
            if problem is not None:
                raise ConfigError(f"redis at {self.where()}: {problem}") from None
        finally:
            probe.close()

    def _tls_files(self) -> list[tuple[str, str]]:
        if self.tls is None:
            return []
        named = [
            ("MCP_MEDIA_REDIS_CA_CERTS", self.tls.ca_certs),
            ("MCP_MEDIA_REDIS_CERTFILE", self.tls.certfile),
            ("MCP_MEDIA_REDIS_KEYFILE", self.tls.keyfile),
        ]
        return [(name, value) for name, value in named if value]

    def _check_sentinels(self, timeout: float) -> None:
        """At least one sentinel answers and it knows the master; a sentinel that refuses
        our TLS or password is named."""
        kwargs = self._sentinel_kwargs(
            {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        )
        unknown = []
        for host, port in self.sentinels:
            sentinel = redis.Redis(host, port, **kwargs)
            try:
                masters = sentinel.sentinel_masters()  # type: ignore[no-untyped-call]
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
                problem = explain(exc, sentinel=True)
                if problem is not None:
                    raise ConfigError(f"sentinel at {_host(host)}:{port}: {problem}") from None
                continue  # not answering: another may
            finally:
                sentinel.close()
            if self.master_name in masters:
                return
            unknown.append(f"{_host(host)}:{port} knows {sorted(masters) or 'none'}")
        if unknown:
            raise ConfigError(
                f"the sentinels name no master {self.master_name!r} ({'; '.join(unknown)}): "
                "set MCP_MEDIA_REDIS_MASTER_NAME"
            )


def explain(exc: BaseException, *, sentinel: bool = False) -> str | None:
    """What a person must fix, in a few words, or None when the error may pass by itself."""
    text = str(exc)
    lowered = text.lower()
    if "certificate verify failed" in lowered:
        reason = text.split("certificate verify failed:", 1)[-1].split("(")[0].strip(" :)")
        return (
            f"certificate verify failed ({reason or 'untrusted'}): set MCP_MEDIA_REDIS_CA_CERTS "
            "to the CA that signed the server's certificate"
        )
    if isinstance(exc, ssl.SSLError) or "[ssl" in lowered:
        return f"TLS failed ({text[:160]}): does the server speak TLS on that port (rediss://)?"
    if isinstance(exc, redis.AuthenticationError) or "wrongpass" in lowered:
        where = "MCP_MEDIA_REDIS_SENTINEL_PASSWORD" if sentinel else "MCP_MEDIA_REDIS_URL"
        return f"authentication failed ({text[:160]}): check the user and password in {where}"
    if "noauth" in lowered or "authentication required" in lowered:
        where = "MCP_MEDIA_REDIS_SENTINEL_PASSWORD" if sentinel else "MCP_MEDIA_REDIS_URL"
        return f"the server wants a password: give it in {where}"
    if isinstance(exc, redis.exceptions.NoPermissionError) or "noperm" in lowered:
        return f"the user may not do this ({text[:160]}): check the ACL of the URL's user"
    return None


def mask(url: str) -> str:
    """The URL with any password replaced by ***, for printing and logs (each part of a
    `;`-joined sentinel URL too)."""
    return ";".join(_mask_one(part) for part in url.split(";"))


def _mask_one(url: str) -> str:
    if "://" not in url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        # `user:password@`, or a lone `password@` as some write it: never print either.
        creds, _, host = netloc.rpartition("@")
        user = creds.split(":", 1)[0] if ":" in creds else ""
        netloc = f"{user}:***@{host}"
    query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def parse_hostport(text: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or `host` (the sentinel port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not host or (port and not port.isdigit()) or not 0 < int(port or SENTINEL_PORT) < 65536:
        raise ConfigError(f"sentinel address {text!r} is not host:port")
    return host, int(port or SENTINEL_PORT)


def split_sentinel_url(url: str) -> tuple[tuple[tuple[str, int], ...], str]:
    """kombu's `sentinel://[user:pass@]h1:p1[/db];sentinel://h2:p2` as (sentinels, the
    master's redis:// URL with those credentials and database)."""
    sentinels = []
    creds, db, query = "", "0", ""
    for i, part in enumerate(p for p in url.split(";") if p.strip()):
        parts = urlsplit(part.strip())
        if parts.scheme != "sentinel":
            raise ConfigError(f"{mask(part)}: every part of a sentinel URL starts sentinel://")
        netloc = parts.netloc
        if "@" in netloc:
            found, _, netloc = netloc.rpartition("@")
            creds = creds or found
        sentinels.append(parse_hostport(netloc))
        if i == 0:
            db = parts.path.strip("/") or db
            query = parts.query
    first = f"{creds}@" if creds else ""
    return tuple(sentinels), urlunsplit(("redis", f"{first}sentinel-master", f"/{db}", query, ""))


def resilient(target: RedisTarget) -> redis.Redis[bytes]:
    """A client that rides out a broker restart or a failover: connection errors are retried
    with backoff for about half a minute before they surface."""
    return target.client(
        socket_timeout=30,
        socket_connect_timeout=5,
        health_check_interval=15,
        retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), retries=20),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


def bounded_client(
    target: RedisTarget, connect_timeout: float, timeout: float
) -> redis.Redis[bytes]:
    """A client that answers at once (a door's: its caller is waiting): a server that does
    not connect within `connect_timeout` or answer within `timeout` raises. One immediate
    retry on a connection error, for a pooled connection the server closed when it
    restarted; a timeout is never retried (the server is there and does not answer)."""
    return target.client(
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), retries=1, supported_errors=(redis.ConnectionError,)),
    )


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _str(value: object) -> str | None:
    return str(value) if value else None
