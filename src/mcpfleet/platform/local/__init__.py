"""The local platform: runs the same manifests as Kubernetes as supervised processes on one machine.

`mcpfleet up DIR` loads the manifests (`loader`), keeps the state in SQLite (`state`), gives every
workload a stable port (`ports`), runs what the shared reconcile rules plan as processes
(`supervisor`), and converges continuously (`runner`). `discovery` lets the vMCP gateway and the
registry server follow the locally running servers through their source interfaces.
"""
