"""The facts `mcp-media doctor` judges, gathered from the real set-up: the settings, the
model folders, the broker, the store, the vision endpoint and an upstream MCP server. Each
probe takes its own time bound; `doctor` also runs each in a thread it stops waiting for."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from workers.cli.doctor_verdicts import (
    BrokerFacts,
    BrokerKind,
    ModelFacts,
    Ready,
    StoreFacts,
    VisionFacts,
)
from workers.core.capabilities import QUEUES
from workers.core.settings import Settings
from workers.core.stage_configs import tts_model


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


class _Dropped(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if " is not used " in message:
            self.lines.append(message.split(":", 1)[0])


def dropped_settings(env: Mapping[str, str]) -> tuple[str, ...]:
    """The MCP_MEDIA_* variables the doors would drop (a value that does not parse)."""
    from workers.cli.door_start import forgiving_settings, log

    handler = _Dropped()
    log.addHandler(handler)
    was, log.propagate = log.propagate, False  # main() already printed these warnings
    try:
        forgiving_settings(env)
    finally:
        log.removeHandler(handler)
        log.propagate = was
    return tuple(handler.lines)


def model_facts(settings: Settings) -> ModelFacts:
    from workers.provisioning.models import TIERS, list_models

    present = {info.name for info in list_models(settings.home)}
    stt = settings.stt.model_dir or settings.models_root / settings.stt.model
    tts, _ = tts_model(settings)
    return ModelFacts(
        tiers=tuple(tier for tier, names in TIERS.items() if set(names) <= present),
        stt=stt,
        stt_ready=stt.is_dir(),
        tts=tts,
        tts_ready=tts.is_dir(),
        workers_elsewhere=bool(settings.redis_url),
    )


def broker_facts(settings: Settings, timeout: float) -> BrokerFacts:
    from pipelines.errors import ConfigError
    from workers.broker.embedded import running_embedded
    from workers.broker.target import RedisTarget, bounded_client, explain

    if settings.redis_url:
        kind, url = BrokerKind.CONFIGURED, settings.redis_url
        target = RedisTarget.of(settings, url)
        where = target.where()
        for name, path in (
            ("MCP_MEDIA_REDIS_CA_CERTS", settings.redis_ca_certs),
            ("MCP_MEDIA_REDIS_CERTFILE", settings.redis_certfile),
            ("MCP_MEDIA_REDIS_KEYFILE", settings.redis_keyfile),
        ):
            if path is not None and not path.is_file():
                return BrokerFacts(kind, where, problem=f"{name}={path}: no such file")
        # One ping first, within the bound: a host that does not answer costs it once.
        probe = bounded_client(target, timeout, timeout)
        try:
            probe.ping()
            target.check(timeout)  # it answers: now certificates, ACL, the master's name
        except ConfigError as exc:
            return BrokerFacts(kind, where, problem=one_line(exc))
        except Exception as exc:  # no answer, or not Redis that answered
            said = explain(exc)
            if said is None:
                said = f"no answer ({one_line(exc)}; waited up to {timeout:g} s)"
                return BrokerFacts(kind, where, problem=said, silent=True)
            return BrokerFacts(kind, where, problem=said)
        finally:
            probe.close()
    else:
        embedded = running_embedded(settings.home)
        if embedded is None:
            return BrokerFacts(BrokerKind.NONE)
        kind, url, where = BrokerKind.EMBEDDED, embedded.url, f"embedded 127.0.0.1:{embedded.port}"
    return _workers(settings, kind, url, where, timeout)


def _workers(
    settings: Settings, kind: BrokerKind, url: str, where: str, timeout: float
) -> BrokerFacts:
    """The live workers and the queues none takes, as `mcp-media status` reads them, with
    its client's bounds set to `timeout`."""
    from workers.cli.status import collect

    bounds = {"broker_connect_timeout": timeout, "broker_timeout": max(1.0, timeout)}
    bounded = settings.model_copy(update={"api": settings.api.model_copy(update=bounds)})
    try:
        workers = collect(bounded, url)["workers"]
    except Exception as exc:  # no answer, refused: named, never raised
        return BrokerFacts(kind, where, problem=f"no answer ({one_line(exc)})", silent=True)
    taken = {str(queue).split(".")[0] for w in workers for queue in w["queues"]}
    return BrokerFacts(
        kind, where, workers=len(workers), unserved=tuple(q for q in QUEUES if q not in taken)
    )


def store_facts(settings: Settings, timeout: float) -> StoreFacts:
    if settings.store.url is None:
        home = settings.home
        try:
            home.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
                pass
        except OSError as exc:
            return StoreFacts(str(home), shared=False, problem=f"not writable: {one_line(exc)}")
        return StoreFacts(str(home), shared=False)
    from workers.files.shared_files import open_shared_files

    bounded = settings.store.model_copy(update={"timeout": timeout})
    files = open_shared_files(settings.model_copy(update={"store": bounded}))
    try:
        files.blobs.check()
    except Exception as exc:  # missing bucket, refused credentials, no answer
        return StoreFacts(settings.store.url, shared=True, problem=one_line(exc))
    return StoreFacts(files.blobs.describe(), shared=True)


def vision_facts(settings: Settings, timeout: float) -> VisionFacts:
    import urllib.error  # here: every command's start loads this module
    import urllib.request

    vision = settings.vision
    provider = vision.resolved_provider
    ocr = importlib.util.find_spec("rapidocr_onnxruntime") is not None
    if provider != "openai":
        return VisionFacts(provider, ocr_installed=ocr)
    base = (vision.base_url or "").rstrip("/")
    model = vision.model or vision.auxiliary_model or ""
    if not model:
        return VisionFacts(provider, base, ocr_installed=ocr)
    if not base.startswith(("http://", "https://")):
        return VisionFacts(provider, base, model, ocr, problem="not an http(s) URL")
    request = urllib.request.Request(base + "/models")  # noqa: S310 (http(s) only, above)
    key = vision.api_key.get_secret_value()
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) only)
            body = answer.read(1 << 20)
    except urllib.error.HTTPError as exc:
        refused = f"refuses our key ({exc.code})" if exc.code in (401, 403) else ""
        return VisionFacts(provider, base, model, ocr, answered=True, problem=refused)
    except (OSError, ValueError) as exc:  # refused, no route, timed out, a bad URL
        reason = getattr(exc, "reason", exc)
        problem = f"no answer ({one_line(reason)}; waited up to {timeout:g} s)"
        return VisionFacts(provider, base, model, ocr, problem=problem)
    return VisionFacts(provider, base, model, ocr, answered=True, models=_model_ids(body))


def _model_ids(body: bytes) -> tuple[str, ...]:
    """The ids of an OpenAI-protocol /models answer; () for anything else."""
    try:
        data = json.loads(body).get("data", [])
        return tuple(str(entry["id"]) for entry in data if isinstance(entry, dict))
    except (ValueError, AttributeError, KeyError, TypeError):
        return ()


_DISCOVERY = re.compile(r"^mcp_discovery_timeout:\s*([0-9.]+)\s*(?:#.*)?$", re.M)


def hermes_config(env: Mapping[str, str]) -> Path:
    """hermes-agent's config.yaml: under $HERMES_HOME, else ~/.hermes."""
    home = env.get("HERMES_HOME")
    return (Path(home) if home else Path.home() / ".hermes") / "config.yaml"


def discovery_timeout(config: Path) -> float | None:
    """The top-level `mcp_discovery_timeout` of a hermes config.yaml; None when the file or
    the key is not there (hermes then waits its default). A plain line match: mcp-media
    does not depend on a YAML parser for this one number."""
    try:
        found = _DISCOVERY.search(config.read_text(errors="replace"))
    except OSError:
        return None
    try:
        return float(found[1]) if found else None
    except ValueError:
        return None


def proxy_command(command: Sequence[str]) -> list[str]:
    """`mcp-media proxy -- COMMAND`, with the Python running this doctor."""
    return [sys.executable, "-m", "workers.cli.main", "proxy", "--", *command]


def ready(command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> Ready:
    """Start `command` as an MCP client does, and time `initialize` + `tools/list`."""
    import anyio

    async def probe() -> Ready:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=dict(env or os.environ)
        )
        with tempfile.TemporaryFile("w+") as errlog:
            started = time.monotonic()
            try:
                with anyio.fail_after(timeout):
                    async with Client(stdio_client(params, errlog=errlog)) as client:
                        listed = await client.list_tools()
                        took = time.monotonic() - started
                        tools = len(listed.tools)
                        while listed.next_cursor:
                            listed = await client.list_tools(cursor=listed.next_cursor)
                            tools += len(listed.tools)
            except TimeoutError:
                return Ready(problem=f"no tools/list answer within {timeout:g} s")
            except Exception as exc:  # exited, not MCP, not found
                errlog.seek(0)
                said = errlog.read().strip().splitlines()
                last = f"; its stderr: {said[-1][:200]}" if said else ""
                return Ready(problem=f"{_cause(exc)}{last}")
        return Ready(seconds=took, tools=tools)

    result: Ready = anyio.run(probe)
    return result


def _cause(exc: BaseException) -> str:
    """The innermost error of an exception group (anyio's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return one_line(exc)


def shown(command: Sequence[str]) -> str:
    return shlex.join(command)
