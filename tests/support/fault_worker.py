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
from dataclasses import replace
from types import FrameType
from typing import Any

from celery.signals import worker_ready

from pipelines.errors import TransientError
from pipelines.media import Capability
from workers.app import get_app
from workers.capabilities import CAPABILITIES
from workers.settings import Settings
from workers.supervisor import worker_argv
from workers.tasks import make_task

POISON_TASK = "mcp_media.test_poison"
POISON_VERSION = "0bad0bad0bad"


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
    os.environ["MCP_MEDIA_WORKER_QUEUES"] = ",".join(queues)
    app = get_app()
    base = CAPABILITIES[Capability.AUDIO_TRANSCRIBE]
    poison = replace(
        base,
        task_name=POISON_TASK,
        transient=(TransientError,),
        version=lambda _settings: POISON_VERSION,
        stage=lambda res, path, params: os.kill(os.getpid(), signal.SIGKILL),  # type: ignore[arg-type, return-value]
    )
    make_task(app, poison, settings)
    worker_ready.connect(_install_stall, weak=False)
    app.worker_main(worker_argv(settings, queues, concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
