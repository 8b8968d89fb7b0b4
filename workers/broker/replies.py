"""Redis error replies read by their error code, once.

An error reply is `-CODE message`: its first word is the protocol's code (`MISCONF`,
`READONLY`, `WRONGTYPE`, ...). redis-py keeps it as `status_code` (recent versions) or at the
head of the message; a script's error on Redis 6 wraps the failed command's own reply
(`ERR Error running script (call to f_...): @user_script:1: -MISCONF ...`), where Redis 7
answers with the command's code itself. What the code means to us is an outcome.
"""

from __future__ import annotations

import re

import redis

from pipelines.outcomes import Outcome

WRITES_REFUSED = "MISCONF"  # it cannot persist (a failed save or AOF write: a full disk)
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_SCRIPT = "Error running script"
_WRAPPED = ": -"  # where a script error's message quotes the command's reply


def error_code(exc: redis.ResponseError) -> str | None:
    """The code of the reply behind `exc` (a script error: of the command that failed)."""
    text = str(exc)
    if text.startswith(_SCRIPT):
        _, found, inner = text.partition(_WRAPPED)
        return _first_word(inner) if found else None
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code:
        return code
    return _first_word(text)


def _first_word(text: str) -> str | None:
    word = text.split(" ", 1)[0]
    return word if _CODE.fullmatch(word) else None


def refuses_writes(exc: redis.ResponseError) -> bool:
    return error_code(exc) == WRITES_REFUSED


class BrokerUnwritable(redis.ConnectionError):
    """The broker refuses writes (MISCONF): as good as gone until it writes again (the
    workers' transport raises it, so that Celery reconnects)."""


def broker_outcome(exc: BaseException) -> Outcome | None:
    """What `exc` says of the broker: it cannot persist (it refuses writes), or it does not
    answer; None for anything else (a reply to a wrong command is not an outage)."""
    if isinstance(exc, BrokerUnwritable):  # a refusal the transport turned into a loss
        return Outcome.BROKER_CANNOT_PERSIST
    if isinstance(exc, redis.ResponseError):
        return Outcome.BROKER_CANNOT_PERSIST if refuses_writes(exc) else None
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return Outcome.BROKER_UNAVAILABLE
    return None
