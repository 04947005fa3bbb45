"""Evaluated code under an ``eval-*`` profile: checked, rewritten, run under budgets.

``checker`` lists every construct a source uses that its profile does not allow;
``rewriter`` routes calls, loops and the operators that can build huge values through the
budget helpers; ``budgets`` holds one run's counters and helpers; ``runner`` caches the
checked code by source and runs it in the namespace the profile builds; ``patch`` puts
guarded ``eval``/``exec``/``compile`` in ``builtins`` for the program's own code.
"""
