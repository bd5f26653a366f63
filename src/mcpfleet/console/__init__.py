"""The web console: server-rendered pages (FastAPI + Jinja2, autoescaped) with htmx for live parts.

Shows a local fleet from its state folder (objects, phases, causes, logs, manifests), reads servers'
and gateways' tools / prompts / resources live with the MCP SDK's client, calls a tool from a form
built from its JSON schema, searches the catalogues and adds an entry to the fleet as `mcpfleet add`
does, and shows the audit log. `mcpfleet up` serves it (`serve.hosted`); `mcpfleet console serve`
serves it alone. Everything a server says is untrusted and rendered as text ([docs/console.md]).
"""
