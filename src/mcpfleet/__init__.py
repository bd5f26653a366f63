"""mcpfleet: run, register and aggregate fleets of MCP servers on Kubernetes or on one machine."""

from mcpfleet import mcpsdk

__version__ = "0.1.0"

mcpsdk.register()  # the MCP SDK's package __init__s run when first needed, not at every import
