"""What the tier's tests run, applied all at once when the operator is up (the `started` fixture).

Pods start in parallel while earlier tests run, so the tier waits for pod start-up roughly once
instead of once per test. Each entry is (namespace key, manifest); a test reads its namespace from
`started[key]` and waits for its own objects to turn Ready.
"""

from __future__ import annotations

import json

TIME = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: time}
spec:
  image: uvx://mcp-server-time
  args: ["--local-timezone=UTC"]
"""

HTTP = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: everything-http}
spec:
  image: npx://@modelcontextprotocol/server-everything
  transport: streamable-http
  args: ["streamableHttp"]
  mcpPort: 3001
  env:
    - {name: PORT, value: "3001"}
"""


def oci(echo_image: str) -> str:
    return f"""
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {{name: echo-oci}}
spec:
  image: {echo_image}
  transport: stdio
"""


CATALOGUE = {
    "servers": {
        "fetch": {"image": "ghcr.io/example/fetch:1.0.0", "description": "fetches", "transport": "stdio"}
    },
    "remote_servers": {},
}


def remote(ns: str) -> str:
    return (
        TIME
        + f"""---
apiVersion: v1
kind: Secret
metadata: {{name: remote-credentials}}
stringData: {{api-key: not-shown-anywhere}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPExternalAuthConfig
metadata: {{name: api-key}}
spec:
  type: headerInjection
  headerInjection:
    headerName: X-API-Key
    valueSecretRef: {{name: remote-credentials, key: api-key}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRemoteProxy
metadata: {{name: time-remote}}
spec:
  remoteURL: http://mcp-time.{ns}.svc.cluster.local:8080/mcp
  allowPrivateEndpoint: true  # an in-cluster (*.cluster.local) upstream, as ToolHive asks
  transport: streamable-http
  externalAuthConfigRef: {{name: api-key}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: catalogue-data}}
data:
  registry.json: '{json.dumps(CATALOGUE)}'
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRegistry
metadata: {{name: files}}
spec:
  registries:
    - name: curated
      format: toolhive
      configMapRef: {{name: catalogue-data, key: registry.json}}
"""
    )


LIFECYCLE = (
    """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPToolConfig
metadata: {name: time-tools}
spec:
  toolsFilter: ["get_current_time", "convert_time"]
---"""
    + TIME
    + "  toolConfigRef: {name: time-tools}\n"
)

# The optimizer and code mode (tests/realnode/test_optimizer.py), in ToolHive's v1beta1 shape (the
# group named at the top, as in its vmcp_optimizer_*.yaml / vmcp_codemode.yaml examples): two real
# servers in a group; `finder` ranks by keywords only, runs scripts, hides time's convert_time by its
# filter and forbids everything's get-sum by policy; `hybrid` blends in embeddings from an
# EmbeddingServer running mcpfleet's own embedding server (`image: mcpfleet://embeddings`: the real
# WordLlama model from its PyPI wheel, in the mcpfleet image, nothing downloaded), and advertises
# every tool beside the meta-tools.
OPTIMIZER_GROUP = """
apiVersion: mcpfleet.dev/v1beta1
kind: MCPGroup
metadata: {name: tools}
spec: {description: Backends of the optimizer gateways}
---
apiVersion: mcpfleet.dev/v1beta1
kind: MCPServer
metadata: {name: time}
spec:
  groupRef: {name: tools}
  image: uvx://mcp-server-time
  transport: stdio
  args: ["--local-timezone=UTC"]
---
apiVersion: mcpfleet.dev/v1beta1
kind: MCPServer
metadata: {name: everything}
spec:
  groupRef: {name: tools}
  image: npx://@modelcontextprotocol/server-everything
  transport: stdio
---
apiVersion: mcpfleet.dev/v1beta1
kind: VirtualMCPServer
metadata: {name: finder}
spec:
  groupRef: {name: tools}
  config:
    aggregation:
      conflictResolution: prefix
      conflictResolutionConfig: {prefixFormat: "{workload}_"}
      tools:
        - workload: time
          filter: [get_current_time]
    optimizer:
      maxToolsToReturn: 5
    codeMode:
      enabled: true
      parallelMaxConcurrency: 4
      toolCallTimeout: 30s
  incomingAuth:
    type: anonymous
    authzConfig:
      type: inline
      inline:
        policies:
          - 'permit(principal, action, resource);'
          - 'forbid(principal, action == Action::"call_tool", resource == Tool::"everything_get-sum");'
  outgoingAuth: {source: discovered}
"""


def optimizer() -> str:
    return (
        OPTIMIZER_GROUP
        + """---
apiVersion: mcpfleet.dev/v1beta1
kind: EmbeddingServer
metadata: {name: wordllama}
spec:
  image: mcpfleet://embeddings
---
apiVersion: mcpfleet.dev/v1beta1
kind: VirtualMCPServer
metadata: {name: hybrid}
spec:
  groupRef: {name: tools}
  embeddingServerRef: {name: wordllama}
  config:
    optimizer:
      exposeAllTools: true
      hybridSearchSemanticRatio: "0.5"
  incomingAuth: {type: anonymous}
"""
    )


MISSING = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: absent}
spec:
  image: uvx://mcp-server-not-in-the-image
"""


def manifests(namespaces: dict[str, str], echo_image: str) -> dict[str, str]:
    """key -> manifest, for the namespaces `started` created."""
    return {
        "http": HTTP,
        "oci": oci(echo_image),
        "remote": remote(namespaces["remote"]),
        "lifecycle": LIFECYCLE,
        "missing": MISSING,
        "optimizer": optimizer(),
    }


KEYS = ("http", "oci", "remote", "lifecycle", "missing", "optimizer")
