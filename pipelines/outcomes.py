"""Outcome codes: why a job (or a submission) did not end `done`, as one typed set.

The code is decided where the failure happens (each `MediaError` subclass names its own,
a full disk is told by the errno of the `OSError` behind it, the job path names its own
refusals) and carried in the result's meta, its event, and its dead letter. Every door maps
codes to its protocol through one table of its own; the reason next to the code is text for
people, never read to decide anything.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    # The input: retrying the same bytes will not help.
    NOT_AUDIO = "not_audio"  # not a media container, or no audio stream in it
    UNREADABLE_AUDIO = "unreadable_audio"  # corrupt, truncated, outside the decoding limits
    EMPTY_AUDIO = "empty_audio"  # zero bytes, or zero samples
    AUDIO_TOO_LARGE = "audio_too_large"  # more bytes than the limit
    AUDIO_TOO_LONG = "audio_too_long"  # longer than the duration limit
    UNREADABLE_IMAGE = "unreadable_image"
    IMAGE_TOO_LARGE = "image_too_large"  # a pixel bomb, a decode limit, no encoding fits
    EMPTY_TEXT = "empty_text"  # nothing to speak once markup is gone
    TEXT_TOO_LONG = "text_too_long"
    INVALID_INPUT = "invalid_input"  # the request's own fields (speed, format, ...)
    ENCRYPTED_DOCUMENT = "encrypted_document"  # locked by a password we do not have
    UNREADABLE_DOCUMENT = "unreadable_document"  # broken, truncated, not what it claims
    EMPTY_DOCUMENT = "empty_document"  # zero bytes, no pages, or no text on the pages read
    DOCUMENT_TOO_LARGE = "document_too_large"  # over the reader's memory budget
    # What was asked of the workers.
    UNSUPPORTED = "unsupported"  # a voice the model lacks, a blend this engine cannot speak
    BAD_CONFIGURATION = "bad_configuration"  # unusable settings or model files
    MODEL_MISSING = "model_missing"  # the model the job needs is not prepared where it ran
    SKIPPED = "skipped"  # the capability is turned off
    # The provider or the engine.
    TIMEOUT = "timeout"  # the provider did not answer in time, or the job's time limit
    PROVIDER_UNAVAILABLE = "provider_unavailable"  # refused connections, 5xx, 429
    PROVIDER_BUSY = "provider_busy"  # no provider slot became free
    PROVIDER_REJECTED = "provider_rejected"  # 4xx, refusals, answers that cannot be used
    ENGINE_FAILED = "engine_failed"  # the engine made no usable output from this input
    UNAVAILABLE = "unavailable"  # something else the job needs did not answer: retry
    # The cluster.
    DISK_FULL = "disk_full"  # ENOSPC / EDQUOT where the job or the door writes
    CANCELLED = "cancelled"
    VERSION_MISMATCH = "version_mismatch"  # keyed for other models or settings
    DEAD_LETTERED = "dead_lettered"  # delivered over the cap: it kills its worker
    RETRIES_EXHAUSTED = "retries_exhausted"  # its key stayed claimed by another delivery
    MALFORMED_JOB = "malformed_job"  # the message names no usable input
    INPUT_MISSING = "input_missing"  # the input blob is in no cache and not in the store
    BROKER_UNAVAILABLE = "broker_unavailable"  # the broker does not answer
    BROKER_CANNOT_PERSIST = "broker_cannot_persist"  # it refuses writes (MISCONF)
    NO_WORKER = "no_worker"  # no live worker serves the queue
    QUEUE_FULL = "queue_full"  # admission: the queue is at its high water
    QUEUE_BUSY = "queue_busy"  # admission: it would finish past the caller's wait
    INTERNAL = "internal"  # a bug, or a failure nothing names

    @classmethod
    def read(cls, value: object) -> Outcome | None:
        """The code a stored value names; None for none, or for one this version does not
        know (a newer writer's): the caller then derives it as for an old result."""
        if not isinstance(value, str):
            return None
        try:
            return cls(value)
        except ValueError:
            return None
