"""The root of the local platform's own exceptions, so a caller can handle any of them at once.

Each keeps the built-in base it had (ValueError, RuntimeError) for callers that catch those: a path
that would leave the state folder, a sandbox, container or volume that cannot be set up, an issuer,
a fleet edit that cannot be done, the state lock held by another process, a workload that cannot run.
"""


class LocalPlatformError(Exception):
    """Any error of the local platform; the message says why."""
