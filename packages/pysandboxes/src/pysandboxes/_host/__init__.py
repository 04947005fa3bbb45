"""The trusted side: it reads the rules, decides the plan, spawns, waits, concludes.

Code here runs with the user's rights (``python-sb``'s process, the waiter it becomes,
or the application in partial mode) and never runs code the sandbox chose. ``launch``
is the whole pass; ``learning`` is the variant of the plan and of the conclusion that
writes rules from what the program did.
"""
