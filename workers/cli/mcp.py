"""CLI commands of the MCP door: proxy, mcp (own tools alone) and intercept."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

from pipelines.blocks import unwrap_result
from pipelines.errors import InvalidToolResult
from pipelines.fit import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, MAX_RESULT_BYTES, FitLimits
from pipelines.render import unprocessed_note
from pipelines.rewrite import (
    DEFAULT_INLINE_MAX,
    MediaPolicy,
    RewritePolicy,
    SentMediaTag,
    rewrap,
)
from workers.cli.common import CliError, print_json
from workers.cli.door_start import (
    door_gateway,
    forgiving_settings,
    unservable_tools,
    usable_settings,
)
from workers.core.settings import Settings
from workers.doors.mcp.rewriter import DoorOptions, MediaRewriter, failure_reason
from workers.gateways.connect import open_gateway

if TYPE_CHECKING:
    from workers.doors.mcp.proxy import Proxy
    from workers.doors.mcp.upstream_process import Prestarted


def add_door_flags(p: argparse.ArgumentParser, *, serves_links: bool = True) -> None:
    """The options every door takes. `link`, `fit` and `--inline-max` need a server that
    answers resources/read for mcp-media:// URIs (proxy, mcp); intercept has none."""
    linking = (MediaPolicy.LINK, MediaPolicy.FIT)
    policies = [m.value for m in MediaPolicy if serves_links or m not in linking]
    p.add_argument(
        "--images",
        choices=policies,
        default="keep",
        help="image blocks (keep; fit: a downscaled copy when over a --max-image-* limit)",
    )
    audio = [m for m in policies if m != MediaPolicy.FIT]
    p.add_argument("--audio", choices=audio, default="keep", help="audio blocks (keep)")
    if serves_links:
        p.add_argument(
            "--inline-max",
            type=int,
            default=DEFAULT_INLINE_MAX,
            metavar="BYTES",
            help="embedded blobs larger than this become a resource link (1 MiB)",
        )
        p.add_argument(
            "--max-image-side",
            type=_positive,
            default=MAX_IMAGE_SIDE,
            metavar="PX",
            help=f"--images fit: longest side sent ({MAX_IMAGE_SIDE})",
        )
        p.add_argument(
            "--max-image-bytes",
            type=_positive,
            default=MAX_IMAGE_BYTES,
            metavar="N",
            help=f"--images fit: one image's base64 size ({MAX_IMAGE_BYTES}, 5 MiB)",
        )
        p.add_argument(
            "--max-result-bytes",
            type=_positive,
            default=MAX_RESULT_BYTES,
            metavar="N",
            help=f"--images fit: the whole result as JSON ({MAX_RESULT_BYTES}, 1 MiB); "
            "the largest media become links past it",
        )
        p.add_argument(
            "--resolve-links",
            choices=["auto", "on", "off"],
            help="read an upstream's resource links (resources/read on its session) and "
            "treat them as embedded resources: cached, summarised, digested; auto: on for "
            "--images text; default MCP_MEDIA_MCP__RESOLVE_LINKS, else auto",
        )
    p.add_argument(
        "--sent-media-tag",
        choices=[t.value for t in SentMediaTag],
        help="our MEDIA: line under an image or audio block the client receives as such "
        "(keep, fit): always, omit, or auto: omitted for a client named hermes* (which "
        "writes its own; hermes-agent 0.19 sends no name of its own: give it omit); "
        "default MCP_MEDIA_MCP__SENT_MEDIA_TAG, else auto",
    )
    p.add_argument(
        "--wait", type=float, default=20.0, metavar="S", help="wait for summaries (20; 0: never)"
    )
    p.add_argument("--inline", action="store_true", help="run jobs here even with a broker")
    p.add_argument("--server", help="the upstream server's name, for read_resource hints")


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {number}")
    return number


def door_options(args: argparse.Namespace, settings: Settings | None = None) -> DoorOptions:
    # Without --inline-max (intercept) nothing becomes a link: no server could serve it.
    # 0 is a limit like any other (every blob a link), not "none".
    inline_max = args.inline_max if getattr(args, "inline_max", None) is not None else sys.maxsize
    fit = FitLimits()
    if hasattr(args, "max_image_side"):
        try:
            fit = FitLimits(args.max_image_side, args.max_image_bytes, args.max_result_bytes)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    policy = RewritePolicy(
        images=MediaPolicy(args.images),
        audio=MediaPolicy(args.audio),
        inline_max=inline_max,
        fit=fit,
    )
    given = getattr(args, "sent_media_tag", None)
    tag = SentMediaTag(given or (settings.mcp.sent_media_tag if settings else "auto"))
    resolve = getattr(args, "resolve_links", None) or (
        settings.mcp.resolve_links if settings else "auto"
    )
    return DoorOptions(
        policy=policy,
        wait=args.wait,
        inline=args.inline,
        server=args.server,
        sent_media_tag=tag,
        resolve_links=resolve == "on" or (resolve == "auto" and policy.images is MediaPolicy.TEXT),
    )


def cmd_intercept(args: argparse.Namespace, settings: Settings) -> int:
    """One CallToolResult on stdin, the rewritten one on stdout (a gateway `after:exec` hook).

    Fail-open: input that is not a tool result is echoed unchanged, with the reason on stderr,
    so the agent still gets the tool's answer.
    """
    raw = sys.stdin.buffer.read()
    try:
        original = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        sys.stderr.write(f"mcp-media intercept: input is not JSON ({exc}); passed through\n")
        sys.stdout.buffer.write(raw)
        return 0
    rewriter: MediaRewriter | None = None
    try:
        try:
            options = door_options(args, settings)
            rewriter = MediaRewriter(
                settings, options, open_gateway(settings, inline=options.inline)
            )
            answer = rewrap(original, rewriter.rewrite(original))
        except InvalidToolResult as exc:
            sys.stderr.write(f"mcp-media intercept: {exc}; passed through\n")
            sys.stdout.buffer.write(raw)
            return 0
        except Exception as exc:  # the broker, the disk, a bug: still never lose a result
            reason = failure_reason(exc)
            sys.stderr.write(f"mcp-media intercept: not processed ({reason}); passed through\n")
            unprocessed = _with_note(original, unprocessed_note(reason))
            if unprocessed is None:
                sys.stdout.buffer.write(raw)
                return 0
            answer = unprocessed
        print_json(answer)
        sys.stdout.flush()
        sys.stdout.close()  # the caller has its answer; jobs still running here finish first
    finally:
        if rewriter is not None:
            rewriter.close(finish_jobs=True)
    return 0


def _with_note(original: Any, note: str) -> dict[str, Any] | None:
    """`original` as it came plus a text block `note`, or None if it has no content list."""
    try:
        result = unwrap_result(original)
    except InvalidToolResult:
        return None
    content = result.get("content")
    if not isinstance(content, list) or not isinstance(original, dict):
        return None
    return rewrap(original, {**result, "content": [*content, {"type": "text", "text": note}]})


def add_server_flags(p: argparse.ArgumentParser) -> None:
    add_door_flags(p)
    p.add_argument(
        "--allow-root",
        action="append",
        default=[],
        metavar="DIR",
        help="own tools may read files under DIR (repeatable; default: the cache only)",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on HOST:PORT instead of stdio (bearer token required)",
    )
    p.add_argument(
        "--token",
        help="the bearer token for --http (default: generated in $MCP_MEDIA_HOME/mcp-token)",
    )
    # A server an agent starts fails open: a setting it cannot use is dropped, not fatal.
    p.set_defaults(load_settings=forgiving_settings)


def _serve(args: argparse.Namespace, settings: Settings, specs: list[Any]) -> int:
    from pathlib import Path

    listen = token = None
    if args.http:
        # Over stdio the upstreams start before the MCP SDK is imported (launch): not here.
        from workers.doors.listen import ListenError, check_free
        from workers.doors.mcp.http import parse_listen, resolve_token

        try:
            listen = parse_listen(args.http)
            token = resolve_token(settings.home, args.token, listen[0])
            check_free(*listen)
        except ListenError as exc:
            raise CliError(str(exc)) from None
    options = door_options(args, settings)
    roots = [Path(r) for r in args.allow_root]
    if listen is None or token is None:
        from workers.doors.mcp.early_front import Early
        from workers.doors.mcp.launch import serve_stdio_started
        from workers.doors.mcp.tool_definitions import WIRE

        usable = usable_settings(settings)
        hidden = unservable_tools(usable, inline=options.inline)
        limits = usable.mcp
        early = Early(WIRE, hidden, limits.max_upstream_message_bytes)

        def build(prestarted: Prestarted) -> Proxy:
            # After the upstreams started: their start-up overlaps the door's imports.
            from workers.doors.mcp.serve import build_proxy

            gateway = partial(door_gateway, usable, inline=options.inline)
            return build_proxy(usable, specs, options, gateway, roots, prestarted, hidden)

        return serve_stdio_started(specs, build, early if limits.early_answers else None)
    from workers.doors.mcp.http import serve_http
    from workers.doors.mcp.serve import build_proxy

    usable = usable_settings(settings)
    gateway = door_gateway(usable, inline=options.inline)
    hidden = unservable_tools(usable, inline=gateway.runs_here)
    proxy = build_proxy(usable, specs, options, gateway, roots, hidden_tools=hidden)
    where = "the one given with --token" if args.token else str(settings.home / "mcp-token")
    sys.stderr.write(
        f"mcp-media: MCP over streamable HTTP on http://{listen[0]}:{listen[1]}/mcp "
        f"(bearer token: {where})\n"
    )
    return serve_http(proxy, listen[0], listen[1], token)


def cmd_proxy(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from workers.doors.mcp.upstream_specs import ConfigFileError, UpstreamSpec, read_config

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if bool(args.config) == bool(command):
        raise CliError("give either --config FILE or -- CMD ARGS... (the server to wrap)")
    try:
        if args.config:
            specs = read_config(Path(args.config))
        else:
            name = args.server or Path(command[0]).name
            specs = [UpstreamSpec(name=name, command=command[0], args=tuple(command[1:]))]
    except ConfigFileError as exc:
        raise CliError(str(exc)) from None
    return _serve(args, settings, specs)


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    return _serve(args, settings, [])
