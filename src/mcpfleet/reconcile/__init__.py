"""Reconcile rules per kind: desired state and status transitions, shared by the Kubernetes and local platforms."""
