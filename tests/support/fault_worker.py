"""A real mcp-media worker with one extra task whose stage kills its own process.

    python -m tests.support.fault_worker --queues stt --concurrency 1

Everything else (app, tasks, delivery cap, leases) is the production code: the extra task
goes through the same task factory, so the poison-job scenario exercises the real
redelivery cap and dead-letter list.

SIGUSR2 makes the worker alive but no longer consuming: its channel's QoS stops granting
credit, as a consumer left without credit after a broker restart would. Only a new
connection (a new channel) consumes again.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from celery.signals import worker_ready

from pipelines.media import Capability
from pipelines.results import StageOutcome
from workers.broker.embedded import broker_url
from workers.cli.supervisor import run_worker
from workers.core.capabilities import CAPABILITIES
from workers.core.settings import Settings
from workers.jobs.resources import Resources
from workers.jobs.stages import RUNNERS
from workers.runtime.tasks import make_task
from workers.runtime.worker_app import create_app

POISON_TASK = "mcp_media.test_poison"
POISON_VERSION = "0bad0bad0bad"


def _kill_own_process(res: Resources, path: Path, params: Mapping[str, Any]) -> StageOutcome:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL ends the process")


def _install_stall(sender: Any = None, **_: Any) -> None:
    consumer = sender

    def stall(signum: int, frame: FrameType | None) -> None:
        qos = consumer.task_consumer.channel.qos
        qos.can_consume = lambda: False
        print(f"fault_worker: consumer stalled on purpose (channel {id(qos)})", flush=True)

    signal.signal(signal.SIGUSR2, stall)


def main(argv: list[str]) -> int:
    queues = argv[argv.index("--queues") + 1].split(",")
    concurrency = int(argv[argv.index("--concurrency") + 1])
    settings = Settings()
    app = create_app(settings, broker_url(settings.home, settings.redis_url).url)
    base = CAPABILITIES[Capability.AUDIO_TRANSCRIBE]
    poison = replace(
        base, task_name=POISON_TASK, versioner=lambda _settings, _params: POISON_VERSION
    )
    normal = RUNNERS[Capability.AUDIO_TRANSCRIBE]
    make_task(app, poison, replace(normal, stage=_kill_own_process))
    worker_ready.connect(_install_stall, weak=False)  # SIGUSR2 stalls the consumer
    run_worker(app, settings, queues, concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
