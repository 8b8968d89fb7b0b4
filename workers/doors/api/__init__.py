"""`mcp-media serve`: the HTTP API (OpenAI-compatible audio) and the jobs page.

A client of the queue like the CLI: it submits jobs and waits for their results; it holds
no model. Each module owns one part and gives its routes to `app.create_app`.
"""
