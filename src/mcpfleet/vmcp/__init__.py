"""The virtual MCP gateway: one MCP endpoint aggregating a group of MCP servers."""
