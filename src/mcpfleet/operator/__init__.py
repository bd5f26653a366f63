"""The Kubernetes operator: kopf wiring around the reconcile rules and the Kubernetes platform."""
