"""Catalogues of MCP servers a person can search and add to a fleet (`mcpfleet search/show/add`).

A catalogue entry is an upstream `server.json` document (the official MCP registry's format), from
the bundled offline catalogue (`bundled.json`: real servers published on PyPI and npm), from a
catalogue file (upstream or ToolHive format), or from any registry speaking the official API (the
registries of a running `mcpfleet up`, those listed in the user's `registries.yaml`, `--registry`).
`entries` reads and matches them, `sources` fetches them, `manifest` turns one into the manifest
`mcpfleet add` writes. Entries are untrusted input wherever they come from: each is validated
against the server.json schema, and nothing of it reaches a command line unchecked.
"""
