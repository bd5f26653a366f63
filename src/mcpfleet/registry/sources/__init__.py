"""Sources of registry entries: one reader per kind behind the `SourceReader` protocol."""
