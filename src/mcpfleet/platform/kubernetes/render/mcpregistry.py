"""What an MCPRegistry becomes on Kubernetes (its plan: `mcpfleet.reconcile.mcpregistry`).

A ConfigMap with `registry.yaml`; a ServiceAccount, Role and RoleBinding when a source reads the API
(ConfigMap or kubernetes sources); a Deployment of the registry image with the database / git
passwords as a projected Secret volume and, with SQLite, a scratch `emptyDir` for the database;
a Service in front of the registry API. With configYAML, the user's `volumes` / `volumeMounts` are
merged onto the pod (the plan's pod template) and `pgpassSecretRef` adds an init container, which
runs the registry's own image: the plan does not know images, so its image is set here.
"""

from __future__ import annotations

from mcpfleet.platform.kubernetes.render.objects import Manifest, Owner, workload
from mcpfleet.reconcile.model import Images, WorkloadPlan


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    manifests = workload(plan, owner, images.registry)
    for manifest in manifests:
        if manifest["kind"] == "Deployment":
            for init in manifest["spec"]["template"]["spec"].get("initContainers", []):
                init.setdefault("image", images.registry)
    return manifests
