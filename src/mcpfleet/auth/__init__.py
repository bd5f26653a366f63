"""Authentication of incoming clients, shared by the data-plane services (the proxy and the vMCP gateway).

`mcpfleet.auth.oidc` owns the incoming-auth config model (`IncomingAuthSettings`, `OIDCSettings`, the auth
config file) and the authenticators (anonymous, OIDC/JWKS, RFC 7662 introspection);
`mcpfleet.auth.asgi` owns the ASGI guard that turns them into `401` challenges and the RFC 9728
protected-resource metadata. Nothing here imports the operator or the control plane.
"""
