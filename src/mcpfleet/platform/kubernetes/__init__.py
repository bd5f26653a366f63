"""The Kubernetes platform: render a WorkloadPlan into objects, apply only differences, observe them.

`render` turns a plan into manifests (owner references, labels, checksums), `apply` applies them with
server-side apply (field manager "mcpfleet") skipping unchanged children, `observe` reads Deployments
and Services back into a WorkloadObservation. Nothing here knows about kopf.
"""
