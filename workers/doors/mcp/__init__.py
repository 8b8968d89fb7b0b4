"""The MCP door: the media-aware proxy, mcp-media's own tools and the gateway interceptor."""
