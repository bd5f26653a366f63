"""The `mcpfleet` command line: one module per command group, heavy imports deferred to the command body."""
