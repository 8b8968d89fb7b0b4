"""Hostile MCP tool results: generator, expectations and the oracle that checks them."""
