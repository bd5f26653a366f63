"""Resource models of the mcpfleet.dev/v1alpha1 API: one module per kind, shared by both platforms."""
