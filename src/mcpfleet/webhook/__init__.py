"""MCPWebhookConfig in the data plane: HTTP webhooks that rewrite (mutating) and approve or deny
(validating) each MCP request before it reaches the server, with ToolHive's wire protocol.

`config` is the proxy's `--webhook-config` file, `protocol` the payloads and the (hostile-input)
response parser, `client` the bounded HTTP calls (timeout, size cap, HMAC signature, TLS) and
`asgi` the middleware in the proxy's stack (docs/webhooks.md).
"""
