"""mcpfleet: run, register and aggregate fleets of MCP servers on Kubernetes or on one machine."""

__version__ = "0.1.0"
