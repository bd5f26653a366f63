"""Platforms that apply reconcile results: Kubernetes objects or local processes."""
