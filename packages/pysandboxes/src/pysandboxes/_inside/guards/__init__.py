"""Guards: they report each access to the enforcer, which decides."""
