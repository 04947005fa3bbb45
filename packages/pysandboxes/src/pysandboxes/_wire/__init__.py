"""What crosses the wall between the trusted side and a sandboxed process.

``spec``: what the trusted side hands the child it spawns (one way, encoded here,
decoded by the child's bootstrap). ``codec``: the only module that decodes what a
sandboxed process sends back (learning events), as values, never as code.
"""
