"""The registry server: the upstream MCP registry API over synced sources."""
