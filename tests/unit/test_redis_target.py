"""Settings turned into ways to reach Redis: URLs, TLS, Sentinel, Celery's options, masking,
and the one-line messages of what only a person can fix. Nothing here connects."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import redis
import redis.sentinel

from pipelines.errors import ConfigError
from workers.broker.celery_config import base_app
from workers.broker.target import RedisTarget, explain, mask, parse_hostport
from workers.core.settings import Settings

pytestmark = pytest.mark.unit


def settings(**env: str) -> Settings:
    return Settings.from_env({f"MCP_MEDIA_{k.upper()}": v for k, v in env.items()})


def test_a_plain_url_is_used_as_given() -> None:
    target = RedisTarget.of(settings(redis_url="redis://:pw@10.0.0.5:6379/2"))
    assert target.tls is None and target.sentinels == ()
    assert target.celery_url() == "redis://:pw@10.0.0.5:6379/2"
    assert (target.password, target.db) == ("pw", 2)
    conf = target.celery_conf({"visibility_timeout": 60})
    assert conf["broker_use_ssl"] is False
    assert conf["broker_transport_options"] == {"visibility_timeout": 60}


def test_rediss_verifies_against_the_configured_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    target = RedisTarget.of(
        settings(redis_url="rediss://app:s3cret@redis.example:6380/0", redis_ca_certs=str(ca))
    )
    assert target.tls is not None and target.tls.ca_certs == str(ca)
    assert target.username == "app" and target.password == "s3cret"
    conf = target.celery_conf({})
    # kombu would connect to rediss:// without verifying when given no ssl options at all
    assert conf["broker_use_ssl"]["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    assert conf["broker_use_ssl"]["ssl_ca_certs"] == str(ca)
    assert "ssl_cert_reqs=required" in conf["broker_url"] and "ssl_ca_certs=" in conf["broker_url"]
    # A worker builds its store from app.conf.broker_url: the same target comes back.
    assert RedisTarget.of(settings(), conf["broker_url"]) == target
    kwargs = target.tls.redis_kwargs()
    assert kwargs["ssl_cert_reqs"] == "required" and kwargs["ssl_ca_certs"] == str(ca)


def test_a_ca_file_turns_a_redis_url_into_tls_and_url_options_are_honoured(
    tmp_path: Path,
) -> None:
    target = RedisTarget.of(
        settings(redis_url="redis://h:1/0", redis_certfile=str(tmp_path / "client.pem"))
    )
    assert target.url.startswith("rediss://") and target.tls is not None
    assert target.tls.certfile == str(tmp_path / "client.pem")
    given = RedisTarget.of(settings(redis_url="rediss://h:1/0?ssl_ca_certs=/etc/ca.pem&x=1"))
    assert given.tls is not None and given.tls.ca_certs == "/etc/ca.pem"
    assert given.url == "rediss://h:1/0?x=1"  # the TLS options moved out of the URL
    with pytest.raises(ConfigError, match="ssl_cert_reqs"):
        RedisTarget.of(settings(redis_url="rediss://h:1/0?ssl_cert_reqs=maybe"))


def test_sentinels_reach_the_named_master_for_the_store_and_for_celery() -> None:
    chosen = settings(
        redis_url="redis://app:pw@mymaster/3",
        redis_sentinels="10.0.0.1:26379, sentinel-b",
        redis_master_name="media",
        redis_sentinel_password="sentinel-pw",
        redis_transport_options='{"visibility_timeout": 7200, "max_connections": 20}',
    )
    target = RedisTarget.of(chosen)
    assert target.sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26379))
    conf = target.celery_conf({"visibility_timeout": 60})
    assert conf["broker_url"] == ("sentinel://app:pw@10.0.0.1:26379/3;sentinel://sentinel-b:26379")
    options = conf["broker_transport_options"]
    assert options["master_name"] == "media"
    assert options["sentinel_kwargs"] == {"password": "sentinel-pw"}
    assert options["visibility_timeout"] == 7200  # the settings' options win
    assert options["max_connections"] == 20
    assert RedisTarget.of(chosen, conf["broker_url"]) == target
    client = target.client()
    pool = client.connection_pool
    assert isinstance(pool, redis.sentinel.SentinelConnectionPool)
    assert pool.service_name == "media"
    assert pool.connection_kwargs["password"] == "pw" and pool.connection_kwargs["db"] == 3
    assert pool.connection_class is redis.sentinel.SentinelManagedConnection
    client.close()


def test_sentinels_over_tls_carry_the_ca_to_both_sentinels_and_master(tmp_path: Path) -> None:
    ca = str(tmp_path / "ca.pem")
    target = RedisTarget.of(settings(redis_sentinels="s1:5000", redis_ca_certs=ca))
    conf = target.celery_conf({})
    assert conf["broker_transport_options"]["sentinel_kwargs"]["ssl_ca_certs"] == ca
    assert conf["broker_use_ssl"]["ssl_ca_certs"] == ca
    assert conf["broker_url"].startswith("sentinel://s1:5000/0?ssl_cert_reqs=required")
    assert RedisTarget.of(settings(redis_sentinels="s1:5000"), conf["broker_url"]).tls == target.tls
    pool = target.client().connection_pool
    assert pool.connection_class is redis.sentinel.SentinelManagedSSLConnection


def test_sentinels_alone_never_start_the_embedded_broker() -> None:
    chosen = settings(redis_sentinels="s1:26379")
    assert chosen.redis_url == "redis://mymaster/0"
    assert settings().redis_url is None


def test_celery_s_sentinel_url_spelling_is_read_too() -> None:
    target = RedisTarget.of(settings(redis_url="sentinel://:pw@a:1/1;sentinel://b:2"))
    assert target.sentinels == (("a", 1), ("b", 2))
    assert (target.password, target.db) == ("pw", 1)
    with pytest.raises(ConfigError, match="sentinel://"):
        RedisTarget.of(settings(redis_url="sentinel://a:1;redis://b:2"))
    with pytest.raises(ConfigError, match="redis://, rediss:// or sentinel://"):
        RedisTarget.of(settings(redis_url="http://a:1"))


def test_base_app_takes_the_broker_options_from_the_target(tmp_path: Path) -> None:
    chosen = settings(
        home=str(tmp_path),
        redis_sentinels="s1:26379,s2:26380",
        redis_transport_options='{"socket_keepalive": true}',
    )
    app = base_app(chosen)
    options = app.conf.broker_transport_options
    assert app.conf.broker_url.startswith("sentinel://s1:26379/0;sentinel://s2:26380")
    assert options["master_name"] == "mymaster" and options["socket_keepalive"] is True
    assert options["visibility_timeout"] > 1800  # still above the longest hard limit
    assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert app.conf.broker_transport == "workers.broker.transport:SentinelTransport"
    assert base_app(settings(redis_url="redis://h:1/0")).conf.broker_transport == (
        "workers.broker.transport:Transport"
    )
    app.close()


def test_sentinel_addresses() -> None:
    assert parse_hostport("host") == ("host", 26379)
    assert parse_hostport(" 10.1.2.3:5000 ") == ("10.1.2.3", 5000)
    assert parse_hostport("[::1]:7000") == ("::1", 7000)
    for bad in ("", ":1", "h:port", "h:0", "h:70000"):
        with pytest.raises(ConfigError, match="host:port"):
            parse_hostport(bad)


def test_passwords_are_never_printed() -> None:
    assert mask("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert mask("rediss://app:pw@h:1/0") == "rediss://app:***@h:1/0"
    assert mask("redis://pw@h:1/0") == "redis://:***@h:1/0"
    assert mask("sentinel://:pw@a:1/0;sentinel://:pw@b:2") == (
        "sentinel://:***@a:1/0;sentinel://:***@b:2"
    )
    assert mask("redis://h:1/0?password=pw") == "redis://h:1/0?password=***"
    assert mask("redis://h:1/0") == "redis://h:1/0"
    target = RedisTarget.of(settings(redis_url="rediss://app:pw@h:1/0"))
    assert "pw" not in target.where().replace("app", "")
    sentinel = RedisTarget.of(settings(redis_url="redis://:pw@m/0", redis_sentinels="a:1"))
    assert sentinel.where() == "master 'mymaster' of sentinels a:1"


def test_what_only_a_person_can_fix_is_said_in_one_line() -> None:
    verify = redis.ConnectionError(
        "Error 1 connecting to 127.0.0.1:6380. [SSL: CERTIFICATE_VERIFY_FAILED] certificate "
        "verify failed: self-signed certificate in certificate chain (_ssl.c:1006)."
    )
    said = explain(verify)
    assert said is not None and "\n" not in said
    assert said.startswith("certificate verify failed (self-signed certificate in certificate")
    assert "MCP_MEDIA_REDIS_CA_CERTS" in said
    wrong = redis.AuthenticationError("invalid username-password pair or user is disabled.")
    assert "MCP_MEDIA_REDIS_URL" in (explain(wrong) or "")
    assert "MCP_MEDIA_REDIS_SENTINEL_PASSWORD" in (explain(wrong, sentinel=True) or "")
    assert "ACL" in (explain(redis.exceptions.NoPermissionError("NOPERM no ping")) or "")
    plain = redis.ConnectionError("Error 1 connecting to h:1. [SSL: WRONG_VERSION_NUMBER] x")
    assert "TLS" in (explain(plain) or "")
    # A server that is not up (yet) is no configuration error: clients retry.
    assert (
        explain(redis.ConnectionError("Error 111 connecting to h:1. Connection refused.")) is None
    )
    assert explain(redis.TimeoutError("Timeout connecting to server")) is None


def test_a_missing_certificate_file_is_named_before_any_connection(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    target = RedisTarget.of(settings(redis_url="rediss://h:1/0", redis_ca_certs=str(missing)))
    with pytest.raises(ConfigError, match=f"MCP_MEDIA_REDIS_CA_CERTS={missing}: no such file"):
        target.check()


def test_no_url_at_all_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="MCP_MEDIA_REDIS_URL"):
        RedisTarget.of(settings())
