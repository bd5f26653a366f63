"""The local platform: runs the same manifests as Kubernetes as supervised processes on one machine.

`mcpfleet up DIR` loads the manifests (`loader`), keeps the state in SQLite (`state`, on a thread
of its own; `snapshot` reads it directly for the quick commands), gives every workload a stable
port (`ports`), asks the shared reconcile rules what to run (`rules`), runs it as processes
(`supervisor`) and converges continuously (`runner`). `discovery` and `dataplane` let the vMCP gateway and the registry server
follow the locally running servers through their own source interfaces. `commands`, `views` and
`display` are the bodies of `mcpfleet up/down` and `get/logs` and what they print.
"""
