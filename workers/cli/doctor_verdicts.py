"""What `mcp-media doctor` says about each part of a set-up: plain facts in (gathered by
`doctor_probes`), one verdict line out. No I/O here, so every rule is tested on its own."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# hermes-agent's own bounds (0.19.0), which a user meets first: `hermes chat` and the TUI
# wait this long for MCP servers' tools; its OpenAI STT client gives up after 30 s with no
# retry; a tool call may take 300 s.
HERMES_DISCOVERY_TIMEOUT = 1.5
HERMES_STT_TIMEOUT = 30.0
HERMES_TOOL_TIMEOUT = 300.0
DOOR_WAIT = 20.0  # the MCP doors' --wait default (workers/cli/mcp.py)


class Verdict(StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    topic: str
    verdict: Verdict
    said: str
    fix: str = ""


def exit_code(findings: list[Finding]) -> int:
    """Non-zero only when something fails: a warning leaves a working set-up."""
    return 1 if any(f.verdict is Verdict.FAIL for f in findings) else 0


# settings


def judge_settings(dropped: tuple[str, ...]) -> Finding:
    if not dropped:
        return Finding("settings", Verdict.OK, "every MCP_MEDIA_* value parses")
    return Finding(
        "settings",
        Verdict.WARN,
        f"not used (their defaults are): {'; '.join(dropped)}",
        "correct or remove the variable",
    )


# models


@dataclass(frozen=True, slots=True)
class ModelFacts:
    tiers: tuple[str, ...]  # tiers whose every model is prepared
    stt: Path  # the folder speech to text reads
    stt_ready: bool
    tts: Path
    tts_ready: bool
    workers_elsewhere: bool  # a broker is known: workers elsewhere may hold the models


def judge_models(facts: ModelFacts) -> Finding:
    tiers = ", ".join(facts.tiers) or "none"
    missing = [
        f"{what} ({folder})"
        for what, folder, ready in (
            ("speech to text", facts.stt, facts.stt_ready),
            ("text to speech", facts.tts, facts.tts_ready),
        )
        if not ready
    ]
    if not missing:
        return Finding(
            "models",
            Verdict.OK,
            f"tiers prepared: {tiers}; speech to text {facts.stt.name}, "
            f"text to speech {facts.tts.name}",
        )
    where = (
        "workers elsewhere must hold it"
        if facts.workers_elsewhere
        else "transcribe_audio / speak are not offered"
    )
    return Finding(
        "models",
        Verdict.WARN,
        f"tiers prepared: {tiers}; no model for {' and '.join(missing)}: {where}",
        "mcp-media models prepare (or --tier quality)",
    )


# broker


class BrokerKind(StrEnum):
    CONFIGURED = "configured"  # MCP_MEDIA_REDIS_URL or sentinels
    EMBEDDED = "embedded"  # the home's own redis-server, running
    NONE = "none"  # jobs run in the door's process


@dataclass(frozen=True, slots=True)
class BrokerFacts:
    kind: BrokerKind
    where: str = ""
    problem: str = ""  # why it cannot be used: no answer, refused credentials, ...
    silent: bool = False  # the problem is that it does not answer (else a setting)
    workers: int | None = None  # workers announcing themselves, when it answered
    unserved: tuple[str, ...] = ()  # queues no live worker takes


def judge_broker(facts: BrokerFacts) -> Finding:
    if facts.kind is BrokerKind.NONE:
        return Finding(
            "broker",
            Verdict.OK,
            "none known: jobs run in the door's own process (the in-process default)",
        )
    if facts.problem:
        if facts.kind is BrokerKind.EMBEDDED:
            fix = "mcp-media down, then mcp-media up"
        elif facts.silent:
            fix = "start it, or unset MCP_MEDIA_REDIS_URL to run jobs in the door's process"
        else:
            fix = "correct the setting named, or unset MCP_MEDIA_REDIS_URL for in-process jobs"
        return Finding("broker", Verdict.FAIL, f"{facts.where}: {facts.problem}", fix)
    said = f"{facts.where} answers; {facts.workers or 0} worker(s) announce themselves"
    if not facts.workers:
        return Finding(
            "broker",
            Verdict.WARN,
            f"{said}: jobs stay queued",
            "mcp-media up (broker + workers), or mcp-media worker on another machine",
        )
    if facts.unserved:
        return Finding(
            "broker",
            Verdict.WARN,
            f"{said}; no worker takes {', '.join(facts.unserved)}",
            f"mcp-media worker --queues {','.join(facts.unserved)}",
        )
    return Finding("broker", Verdict.OK, said)


# store


@dataclass(frozen=True, slots=True)
class StoreFacts:
    where: str
    shared: bool  # an S3 bucket (else this machine's home)
    problem: str = ""


def judge_store(facts: StoreFacts) -> Finding:
    if not facts.problem:
        how = "reachable" if facts.shared else "writable"
        return Finding("store", Verdict.OK, f"{facts.where}: {how}")
    fix = (
        "check MCP_MEDIA_STORE__URL and the AWS_* variables"
        if facts.shared
        else "set MCP_MEDIA_HOME to a folder this user can write"
    )
    return Finding("store", Verdict.FAIL, f"{facts.where}: {facts.problem}", fix)


# vision


@dataclass(frozen=True, slots=True)
class VisionFacts:
    provider: str  # openai, local or none (as resolved from the settings)
    base_url: str = ""
    model: str = ""  # "" when none is set
    ocr_installed: bool = True
    answered: bool = False
    problem: str = ""  # why it was not reached, or what it refused
    models: tuple[str, ...] = ()  # what its /models lists (empty: not listed)


def judge_vision(facts: VisionFacts) -> Finding:
    if facts.provider == "none":
        return Finding(
            "vision",
            Verdict.WARN,
            "off: images get no summary",
            "unset MCP_MEDIA_VISION__ENABLED / MCP_MEDIA_VISION__PROVIDER",
        )
    if facts.provider == "local":
        if not facts.ocr_installed:
            return Finding(
                "vision",
                Verdict.WARN,
                "no endpoint, and the local OCR package is missing: images get their facts only",
                "pip install rapidocr-onnxruntime (in mcp-media's environment)",
            )
        return Finding(
            "vision", Verdict.OK, "no endpoint: images are summarised here (facts + local OCR)"
        )
    if not facts.model:
        return Finding(
            "vision",
            Verdict.WARN,
            f"{facts.base_url} has no model: the doors summarise here instead (local OCR)",
            "set MCP_MEDIA_VISION__MODEL",
        )
    if not facts.answered:
        return Finding(
            "vision",
            Verdict.FAIL,
            f"{facts.base_url}: {facts.problem}; every image's summary will name this failure",
            "start the endpoint, or unset MCP_MEDIA_VISION__BASE_URL for local summaries",
        )
    if facts.problem:
        return Finding(
            "vision",
            Verdict.FAIL,
            f"{facts.base_url}: {facts.problem}",
            "check MCP_MEDIA_VISION__API_KEY",
        )
    if facts.models and facts.model not in facts.models:
        listed = ", ".join(facts.models[:5]) + (", ..." if len(facts.models) > 5 else "")
        return Finding(
            "vision",
            Verdict.WARN,
            f"{facts.base_url} answers, but does not list {facts.model} ({listed})",
            "set MCP_MEDIA_VISION__MODEL to one it serves",
        )
    return Finding("vision", Verdict.OK, f"{facts.base_url} answers; model {facts.model}")


# an upstream MCP server, alone and behind the proxy


@dataclass(frozen=True, slots=True)
class Ready:
    """How long `initialize` + `tools/list` took, and what was listed; `problem` if not."""

    seconds: float | None = None
    tools: int = 0
    problem: str = ""


def judge_upstream(command: str, alone: Ready, proxied: Ready) -> list[Finding]:
    if alone.problem:
        return [
            Finding(
                "upstream",
                Verdict.FAIL,
                f"{command}: {alone.problem}",
                "run the command by hand: it must speak MCP on stdin/stdout",
            )
        ]
    said = f"{command}: ready in {alone.seconds:.2f} s, {alone.tools} tools"
    found = [Finding("upstream", Verdict.OK, said)]
    if proxied.problem:
        found.append(
            Finding(
                "proxy",
                Verdict.FAIL,
                f"mcp-media proxy -- {command}: {proxied.problem}",
                "run it with MCP_MEDIA_LOG_LEVEL=INFO and read its stderr",
            )
        )
    elif proxied.tools < alone.tools:
        found.append(
            Finding(
                "proxy",
                Verdict.WARN,
                f"lists {proxied.tools} tools, the upstream alone {alone.tools}",
                "read the proxy's stderr",
            )
        )
    else:
        found.append(
            Finding(
                "proxy",
                Verdict.OK,
                f"ready in {proxied.seconds:.2f} s, {proxied.tools} tools "
                f"({alone.tools} upstream + our own)",
            )
        )
    return found


# the agent's timeouts against our waits


@dataclass(frozen=True, slots=True)
class Waits:
    api_wait: float  # MCP_MEDIA_API__WAIT: `serve` waits this long for a job
    door_wait: float = DOOR_WAIT
    proxy_ready: float | None = None  # measured, when an upstream was given
    proxy_problem: str = ""  # why it was not, when an upstream was given
    # hermes' mcp_discovery_timeout, and where it was read ("" for its default)
    discovery: float = HERMES_DISCOVERY_TIMEOUT
    discovery_from: str = ""


def judge_timeouts(waits: Waits) -> list[Finding]:
    found = [_discovery(waits)]
    if waits.api_wait > HERMES_STT_TIMEOUT:
        found.append(
            Finding(
                "hermes speech",
                Verdict.WARN,
                f"serve waits up to {waits.api_wait:g} s for a transcript (MCP_MEDIA_API__WAIT), "
                f"longer than hermes' STT client ({HERMES_STT_TIMEOUT:g} s, no retry)",
                f"MCP_MEDIA_API__WAIT={HERMES_STT_TIMEOUT - 5:g}: what cannot be ready in time "
                "is refused at once (429) instead",
            )
        )
    else:
        found.append(
            Finding(
                "hermes speech",
                Verdict.OK,
                f"serve waits up to {waits.api_wait:g} s, within hermes' STT client "
                f"({HERMES_STT_TIMEOUT:g} s)",
            )
        )
    verdict = Verdict.OK if waits.door_wait < HERMES_TOOL_TIMEOUT else Verdict.WARN
    found.append(
        Finding(
            "hermes tool calls",
            verdict,
            f"a tool call waits up to {waits.door_wait:g} s for summaries (--wait); hermes "
            f"waits {HERMES_TOOL_TIMEOUT:g} s for a tool result",
            "" if verdict is Verdict.OK else f"--wait {HERMES_TOOL_TIMEOUT / 10:g}",
        )
    )
    return found


def _discovery(waits: Waits) -> Finding:
    """The proxy's time to its tools against hermes' `mcp_discovery_timeout`."""
    where = f"in {waits.discovery_from}" if waits.discovery_from else "by default"
    setting = f"mcp_discovery_timeout ({waits.discovery:g} s {where})"
    topic = "hermes discovery"
    if waits.proxy_problem:
        return Finding(
            topic,
            Verdict.WARN,
            f"hermes chat waits {setting} for MCP tools; not timed: the proxy did not list "
            "its tools (above)",
            "mend the proxy first, then run doctor again",
        )
    if waits.proxy_ready is None:
        return Finding(
            topic,
            Verdict.OK,
            f"hermes chat waits {setting} for MCP tools; not timed: give the upstream "
            "(mcp-media doctor -- CMD ARGS)",
        )
    if waits.proxy_ready > waits.discovery:
        raise_to = max(5, int(waits.proxy_ready * 2 + 1))
        return Finding(
            topic,
            Verdict.WARN,
            f"the proxy's tools came after {waits.proxy_ready:.2f} s, longer than hermes' "
            f"{setting}: they are missing from its first turn",
            f"mcp_discovery_timeout: {raise_to} in hermes' config.yaml",
        )
    return Finding(
        topic,
        Verdict.OK,
        f"the proxy's tools came after {waits.proxy_ready:.2f} s, within hermes' {setting}",
    )


def render(findings: list[Finding]) -> str:
    """One line each (its fix on the next, indented); a count last."""
    width = max((len(f.topic) for f in findings), default=0)
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f.verdict.value:<4}  {f.topic:<{width}}  {f.said}")
        if f.fix and f.verdict is not Verdict.OK:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {f.fix}")
    counts = {v: sum(f.verdict is v for f in findings) for v in Verdict}
    lines.append(" ".join(f"{counts[v]} {v.value}" for v in Verdict))
    return "\n".join(lines) + "\n"
