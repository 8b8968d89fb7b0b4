"""The jobs page of `mcp-media serve`: the queues, workers, dead letters, reprocess runs and
recent results of the cluster, seen and steered from a browser (issue 13)."""

from workers.doors.api.page.routes import routes

__all__ = ["routes"]
