"""`mcp-media doctor`'s rules: facts in, one verdict line (and its fix) out."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from workers.cli.doctor import _Probe
from workers.cli.doctor_probes import _model_ids, discovery_timeout, hermes_config
from workers.cli.doctor_verdicts import (
    BrokerFacts,
    BrokerKind,
    Finding,
    ModelFacts,
    Ready,
    StoreFacts,
    Verdict,
    VisionFacts,
    Waits,
    exit_code,
    judge_broker,
    judge_models,
    judge_settings,
    judge_store,
    judge_timeouts,
    judge_upstream,
    judge_vision,
    render,
)
from workers.cli.main import build_parser

pytestmark = pytest.mark.unit

STT = Path("/home/me/.cache/mcp-media/models/whisper-tiny.en")
TTS = Path("/home/me/.cache/mcp-media/models/piper-en_US-joe-medium")


def models(stt: bool, tts: bool, elsewhere: bool = False) -> ModelFacts:
    tiers = ("default",) if stt and tts else ()
    return ModelFacts(tiers, STT, stt, TTS, tts, elsewhere)


def test_only_a_failure_makes_the_exit_code_non_zero() -> None:
    ok = Finding("a", Verdict.OK, "fine")
    warn = Finding("b", Verdict.WARN, "meh", "do this")
    fail = Finding("c", Verdict.FAIL, "broken", "do that")
    assert exit_code([ok, warn]) == 0
    assert exit_code([ok, warn, fail]) == 1
    assert exit_code([]) == 0


def test_the_screen_gives_each_line_its_fix_and_a_count() -> None:
    text = render(
        [
            Finding("broker", Verdict.FAIL, "redis://h:1/0: no answer", "start it"),
            Finding("store", Verdict.OK, "/home: writable", "never shown"),
        ]
    )
    lines = text.splitlines()
    assert lines[0].startswith("FAIL  broker  redis://h:1/0: no answer")
    assert lines[1].strip() == "fix: start it"
    assert lines[2].startswith("OK    store ")
    assert "never shown" not in text
    assert lines[-1] == "1 OK 0 WARN 1 FAIL"


def test_settings_that_do_not_parse_are_a_warning_the_doors_live_with() -> None:
    assert judge_settings(()).verdict is Verdict.OK
    found = judge_settings(("MCP_MEDIA_VISION__TIMEOUT",))
    assert found.verdict is Verdict.WARN
    assert "MCP_MEDIA_VISION__TIMEOUT" in found.said


def test_models_prepared_or_missing() -> None:
    ready = judge_models(models(True, True))
    assert ready.verdict is Verdict.OK
    assert "default" in ready.said and "whisper-tiny.en" in ready.said
    missing = judge_models(models(False, True))
    assert missing.verdict is Verdict.WARN
    assert str(STT) in missing.said and str(TTS) not in missing.said
    assert "not offered" in missing.said
    assert "mcp-media models prepare" in missing.fix
    # With a broker known, workers elsewhere may hold them: said so, still a warning.
    assert "workers elsewhere" in judge_models(models(False, False, elsewhere=True)).said


def test_no_broker_is_the_in_process_default() -> None:
    found = judge_broker(BrokerFacts(BrokerKind.NONE))
    assert found.verdict is Verdict.OK
    assert "in-process" in found.said


def test_a_configured_broker_that_does_not_answer_fails_and_says_how_to_do_without() -> None:
    where = "redis://127.0.0.1:1/0"
    found = judge_broker(BrokerFacts(BrokerKind.CONFIGURED, where, "no answer", silent=True))
    assert found.verdict is Verdict.FAIL
    assert found.said == "redis://127.0.0.1:1/0: no answer"
    assert found.fix.startswith("start it, or unset MCP_MEDIA_REDIS_URL")
    refused = judge_broker(BrokerFacts(BrokerKind.CONFIGURED, where, "authentication failed"))
    assert refused.verdict is Verdict.FAIL
    assert refused.fix.startswith("correct the setting named")


def test_a_broker_without_workers_warns_and_names_the_queues_nobody_takes() -> None:
    where = "redis://h:6379/0"
    empty = judge_broker(BrokerFacts(BrokerKind.CONFIGURED, where, workers=0, unserved=("x",)))
    assert empty.verdict is Verdict.WARN and "jobs stay queued" in empty.said
    assert "mcp-media up" in empty.fix
    partial = judge_broker(
        BrokerFacts(BrokerKind.EMBEDDED, where, workers=1, unserved=("stt", "tts"))
    )
    assert partial.verdict is Verdict.WARN
    assert partial.fix == "mcp-media worker --queues stt,tts"
    served = judge_broker(BrokerFacts(BrokerKind.EMBEDDED, where, workers=3))
    assert served.verdict is Verdict.OK and "3 worker(s)" in served.said


def test_a_store_that_cannot_be_used_fails_with_the_setting_to_change() -> None:
    assert judge_store(StoreFacts("/home/me", shared=False)).verdict is Verdict.OK
    local = judge_store(StoreFacts("/home/me", shared=False, problem="not writable"))
    assert local.verdict is Verdict.FAIL and "MCP_MEDIA_HOME" in local.fix
    bucket = judge_store(StoreFacts("s3://b", shared=True, problem="no such bucket"))
    assert bucket.verdict is Verdict.FAIL and "MCP_MEDIA_STORE__URL" in bucket.fix


URL = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("facts", "verdict", "said", "fix"),
    [
        (VisionFacts("local"), Verdict.OK, "local OCR", ""),
        (VisionFacts("local", ocr_installed=False), Verdict.WARN, "OCR", "rapidocr"),
        (VisionFacts("none"), Verdict.WARN, "no summary", "MCP_MEDIA_VISION__ENABLED"),
        (VisionFacts("openai", URL), Verdict.WARN, "has no model", "MCP_MEDIA_VISION__MODEL"),
        (
            VisionFacts("openai", URL, "m", problem="no answer (refused)"),
            Verdict.FAIL,
            "no answer (refused)",
            "unset MCP_MEDIA_VISION__BASE_URL",
        ),
        (
            VisionFacts("openai", URL, "m", answered=True, problem="refuses our key (401)"),
            Verdict.FAIL,
            "refuses our key",
            "MCP_MEDIA_VISION__API_KEY",
        ),
        (
            VisionFacts("openai", URL, "m", answered=True, models=("a", "b")),
            Verdict.WARN,
            "does not list m (a, b)",
            "MCP_MEDIA_VISION__MODEL",
        ),
        (VisionFacts("openai", URL, "m", answered=True, models=("m",)), Verdict.OK, "model m", ""),
        (VisionFacts("openai", URL, "m", answered=True), Verdict.OK, "answers", ""),
    ],
)
def test_vision(facts: VisionFacts, verdict: Verdict, said: str, fix: str) -> None:
    found = judge_vision(facts)
    assert found.verdict is verdict
    assert said in found.said
    assert fix in found.fix


def test_an_upstream_that_does_not_start_fails_and_the_proxy_is_not_judged() -> None:
    found = judge_upstream("npx x", Ready(problem="exited: not found"), Ready(problem="same"))
    assert [(f.topic, f.verdict) for f in found] == [("upstream", Verdict.FAIL)]
    assert "exited: not found" in found[0].said


def test_the_upstream_and_the_proxy_are_timed_side_by_side() -> None:
    found = judge_upstream("npx x", Ready(0.31, 4), Ready(1.42, 9))
    assert [(f.topic, f.verdict) for f in found] == [
        ("upstream", Verdict.OK),
        ("proxy", Verdict.OK),
    ]
    assert "0.31 s, 4 tools" in found[0].said and "1.42 s, 9 tools" in found[1].said
    lost = judge_upstream("npx x", Ready(0.3, 4), Ready(1.4, 2))
    assert lost[1].verdict is Verdict.WARN
    broken = judge_upstream("npx x", Ready(0.3, 4), Ready(problem="no answer within 30 s"))
    assert broken[1].verdict is Verdict.FAIL


def test_the_agents_timeouts_against_our_waits() -> None:
    slow = {f.topic: f for f in judge_timeouts(Waits(api_wait=300.0, proxy_ready=2.6))}
    discovery = slow["hermes discovery"]
    assert discovery.verdict is Verdict.WARN
    assert "2.60 s" in discovery.said and "1.5 s" in discovery.said
    assert discovery.fix == "mcp_discovery_timeout: 6 in hermes' config.yaml"
    speech = slow["hermes speech"]
    assert speech.verdict is Verdict.WARN and "300 s" in speech.said and "30 s" in speech.said
    assert speech.fix.startswith("MCP_MEDIA_API__WAIT=25")
    assert slow["hermes tool calls"].verdict is Verdict.OK

    quick = {f.topic: f for f in judge_timeouts(Waits(api_wait=25.0, proxy_ready=0.4))}
    assert all(f.verdict is Verdict.OK for f in quick.values())
    untimed = judge_timeouts(Waits(api_wait=25.0))[0]
    assert untimed.verdict is Verdict.OK and "not timed" in untimed.said
    # an upstream given whose proxy never listed its tools is no OK for hermes either
    failed = judge_timeouts(Waits(api_wait=25.0, proxy_problem="exited with status 1"))[0]
    assert failed.verdict is Verdict.WARN and "did not list" in failed.said
    assert failed.fix


def test_doctor_is_a_command_that_takes_an_upstream_after_a_double_dash() -> None:
    args = build_parser().parse_args(["doctor", "--timeout", "1", "--", "npx", "-y", "srv"])
    assert args.timeout == 1.0
    assert args.command == ["--", "npx", "-y", "srv"]
    assert build_parser().parse_args(["doctor"]).command == []


def test_a_probe_that_does_not_finish_is_given_up_on() -> None:
    release = threading.Event()
    stuck = _Probe(release.wait)
    assert stuck.result(0.01) == "no answer within 0.01 s"
    release.set()
    assert _Probe(lambda: 1 // 0).result(30) == "integer division or modulo by zero"
    assert _Probe(lambda: 7).result(30) == 7


def test_the_endpoints_model_list_is_read_when_there_is_one() -> None:
    assert _model_ids(b'{"data": [{"id": "a"}, {"id": "b"}, 3]}') == ("a", "b")
    assert _model_ids(b"<html>not found</html>") == ()
    assert _model_ids(b'{"object": "list"}') == ()
    assert _model_ids(b"[1, 2]") == ()


def test_hermes_discovery_timeout_is_read_from_its_config(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    assert discovery_timeout(config) is None  # no file: hermes' default
    config.write_text("model:\n  mcp_discovery_timeout: 9\nmcp_discovery_timeout: 5  # slow\n")
    assert discovery_timeout(config) == 5.0  # the top-level key, not a nested one
    config.write_text("mcp_servers: {}\n")
    assert discovery_timeout(config) is None
    assert hermes_config({"HERMES_HOME": "/srv/h"}) == Path("/srv/h/config.yaml")
    assert hermes_config({}).name == "config.yaml"

    waits = Waits(api_wait=25.0, proxy_ready=2.6, discovery=5.0, discovery_from=str(config))
    found = judge_timeouts(waits)[0]
    assert found.verdict is Verdict.OK
    assert f"mcp_discovery_timeout (5 s in {config})" in found.said
