"""One exception tree, split by what a worker should do with the failure."""

from __future__ import annotations


class MediaError(Exception):
    """Root of every error this project raises on purpose."""


class TransientError(MediaError):
    """The same input may succeed later (network, broker, busy provider): retry."""


class PermanentError(MediaError):
    """The input or the configuration is wrong: fail the job, never retry."""


class Skipped(MediaError):
    """Nothing to do (already done, disabled capability)."""


class ConfigError(PermanentError):
    """Settings or model files are unusable; raised at start-up, not per job."""


class InvalidToolResult(PermanentError):
    """The input is not an MCP CallToolResult at all."""
