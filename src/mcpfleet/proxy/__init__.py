"""The MCP proxy: a stdio MCP server (or a remote one) exposed over streamable HTTP and SSE."""
