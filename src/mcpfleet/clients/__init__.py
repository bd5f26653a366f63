"""`mcpfleet client setup / list / remove`: the AI clients' MCP configuration files.

`table` lists the clients (file, format, entry shape, documentation source), one module per file
format edits a file keeping the rest of it (`jsonc` for JSON and JSONC, `tomlfile`, `yamlfile`),
`files` reads and writes them safely (no symlinks, bounded size, atomic, backup) and `setup` plans
and applies the changes. Nothing here knows about fleets: the CLI finds the URL and passes it in.
"""
