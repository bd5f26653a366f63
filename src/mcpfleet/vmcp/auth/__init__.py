"""Authentication of the gateway toward its backends (outgoing). Incoming auth (clients -> vMCP) is
shared with the proxy and lives in `mcpfleet.auth`."""
