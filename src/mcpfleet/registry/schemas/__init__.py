"""Vendored third-party schemas (see README.md here for sources and commits)."""
