"""Authentication of the gateway: incoming (clients -> vMCP) and outgoing (vMCP -> backends)."""
