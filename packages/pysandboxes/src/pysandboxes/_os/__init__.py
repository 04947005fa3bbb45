"""The kernel layer: confinement the kernel enforces, whatever the program's code does.

Mechanism only. Nothing here reads a rule: each provider receives a ``ConfinementPlan``
(compiled from the policy by ``pysandboxes._policy.confinement``) and applies it to the
calling process.
"""
