"""The OAuth 2.1 authorization server a proxy embeds (MCPExternalAuthConfig `embeddedAuthServer`).

`config` is the runtime document the platforms render (Secrets only as file paths), `keys` the JWT
signing keys and the HMAC keys of opaque tokens, `storage` where state lives (memory or Redis),
`upstream` the identity provider users log in with, `server` the HTTP endpoints, `guard` how the
proxy accepts the tokens it issued and what it sends the backend. docs/authserver.md says why.
"""
