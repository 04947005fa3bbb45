"""What crosses between the trusted side and a sandboxed process; ``codec`` decodes it."""
