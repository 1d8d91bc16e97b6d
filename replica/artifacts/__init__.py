"""Files the project writes and reads back: atomic outputs, strict JSON, the user cache,
freshness stamps of generated artifacts, and the model registry that loads (and regenerates)
a declaration's generated module."""
