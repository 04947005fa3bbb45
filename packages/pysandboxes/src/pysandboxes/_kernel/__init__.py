"""The kernel layer's mechanism: confinement the kernel enforces, whatever the code does.

Nothing here reads a rule: each provider receives a ``ConfinementPlan`` (compiled from
the policy by ``pysandboxes._policy.confinement``) and applies it, or builds the command
that applies it. Both sides use it: the trusted side builds the ``bwrap``/``unshare``
command lines and the view they mount; the sandboxed interpreter applies Landlock,
seccomp, the network namespace and the keyring change on itself. ``relay`` waits for a
process while forwarding signals (the waiter, and pid 1 of a namespace).
"""
