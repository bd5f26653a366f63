"""The root of the registry server's own exceptions, so a caller can handle any of them at once.

Each error says what went wrong in a message that is safe to show (no credentials): an unreadable or
invalid config (`config.ConfigError`), a source that cannot be fetched (`sources.base.SourceError`), a
registry token or signing key that cannot be used (`tokens.RegistryTokenError`, `tokens.SigningKeyError`).
"""


class RegistryError(Exception):
    """Any error of the registry server; the message says why."""
