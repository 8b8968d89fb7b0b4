"""CLI commands that run and watch the cluster: status, reprocess, worker, up, models, demo."""

from __future__ import annotations

import argparse
import sys

from workers.cli.common import (
    CliError,
    broker_for,
    check_shared_files,
    connect_client,
    print_json,
    say,
)
from workers.core.settings import Settings


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from workers.cli.status import collect, format_status

    url = broker_for(settings)
    while True:
        report = collect(settings, url)
        if args.json:
            print_json(report)
        else:
            if args.watch and sys.stdout.isatty():
                sys.stdout.write("\x1b[H\x1b[2J")
            sys.stdout.write(format_status(report))
        sys.stdout.flush()
        if not args.watch:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0


def cmd_reprocess(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime

    from pipelines.media import MediaKind
    from workers.core.operations import AlreadyRunning, Selection
    from workers.gateways.reprocess import run

    kinds = {
        "image": (MediaKind.IMAGE,),
        "audio": (MediaKind.AUDIO,),
        "document": (MediaKind.DOCUMENT,),
        "all": (MediaKind.IMAGE, MediaKind.AUDIO, MediaKind.DOCUMENT),
    }[args.kind]
    if settings.vision.resolved_provider == "none":
        kinds = tuple(k for k in kinds if k is not MediaKind.IMAGE)
    try:
        since = datetime.fromisoformat(args.since) if args.since else None
    except ValueError:
        raise CliError(f"--since {args.since!r} is not a date (YYYY-MM-DD[THH:MM])") from None
    selection = Selection(
        kinds=kinds,
        mode="all" if args.all else "missing",
        include_degraded=args.include_degraded,
        since=since,
        limit=args.limit,
    )
    client = connect_client(settings)
    try:
        tally = run(
            client,
            selection,
            dry_run=args.dry_run,
            as_json=args.json,
            restart=args.restart,
            backfill=args.backfill_index,
        )
    except AlreadyRunning as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()
    if args.json:
        print_json(tally.summary() | ({"by_kind": tally.by_kind} if args.dry_run else {}))
    elif args.dry_run:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(tally.by_kind.items())) or "nothing"
        sys.stdout.write(f"would enqueue {tally.selected} ({shown}); {tally.skipped} up to date\n")
    else:
        sys.stdout.write(" ".join(f"{k}={v}" for k, v in tally.summary().items()) + "\n")
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.cli.supervisor import run_worker
    from workers.runtime.worker_app import create_app

    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    from workers.core.capabilities import QUEUES

    unknown = set(queues) - set(QUEUES)
    if unknown or not queues:
        raise CliError(f"unknown queue(s) {sorted(unknown)}; choose from {', '.join(QUEUES)}")
    from workers.runtime.readiness import check_ready

    check_shared_files(settings)  # before the probes: a bucket that cannot be used is one line
    check_ready(settings, queues)
    app = create_app(settings, broker_for(settings))
    return run_worker(app, settings, queues, args.concurrency)


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    """Stop the embedded broker of MCP_MEDIA_HOME; exit 0 whether or not one was running."""
    from workers.broker.embedded import StopHow, running_embedded, stop_embedded

    running = running_embedded(settings.home)
    if running is None:
        say(f"no embedded broker is running for {settings.home}")
        return 0
    if settings.redis_url:
        say("MCP_MEDIA_REDIS_URL is set: stopping the embedded broker of this home only")
    workers = _live_workers(settings, running.url)
    if workers:
        say(
            f"{len(workers)} worker(s) still use it ({', '.join(workers)}); they keep "
            "retrying until a broker is back (an `mcp-media up` that started this broker "
            "starts it again: stop `up` to stop everything)"
        )
    stopped = stop_embedded(settings.home)
    if stopped is None:  # it stopped by itself in the meantime
        say(f"stopped the embedded broker on 127.0.0.1:{running.port}")
        return 0
    if stopped.lost:
        say(stopped.lost)
    if stopped.how is StopHow.RUNNING:
        say(
            f"the embedded broker on 127.0.0.1:{running.port} refused to stop and its pid "
            "could not be shown to be ours: nothing was killed"
        )
        return 1
    how = " (killed by its pid: it refused to shut down)" if stopped.how is StopHow.KILLED else ""
    say(f"stopped the embedded broker on 127.0.0.1:{running.port}{how}")
    return 0


def _live_workers(settings: Settings, url: str) -> list[str]:
    import redis

    from workers.state.shared_state import open_redis_state

    state = open_redis_state(settings, url)
    try:
        return [w.name for w in state.view.live_workers()]
    except redis.RedisError:
        return []
    finally:
        state.close()


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from workers.cli.up import run_up

    return run_up(settings, grace=args.grace, api=args.api)


def _log_line(line: str) -> None:
    sys.stderr.write(line + "\n")


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    from workers.provisioning import models

    if args.action == "prepare":
        names = [*args.names, *(n for tier in args.tier or () for n in models.tier_models(tier))]
        infos = models.prepare(settings.home, names or None, log=_log_line)
    else:
        infos = models.list_models(settings.home)
    if args.json:
        print_json([info.to_json() for info in infos])
    else:
        for info in infos:
            sys.stdout.write(
                f"{info.name:24} {info.kind.value:4} {info.size_bytes / 1e6:7.1f} MB  "
                f"{info.licence:12} {info.source}  {info.path}\n"
            )
            if info.engine:
                sys.stdout.write(f"{'':24} engine: {info.engine}\n")
            if info.languages:
                sys.stdout.write(f"{'':24} languages: {', '.join(info.languages)}\n")
            for voice, language in info.voices:
                sys.stdout.write(f"{'':24} voice {voice} ({language})\n")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.cli.demo import run_demo

    return run_demo(settings)
