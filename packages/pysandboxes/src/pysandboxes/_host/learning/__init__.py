"""Learning on the trusted side: whether a run learns (``plan``), and the conclusion
(``session``): the events of the sandboxed recorder turned into rules (``rules``, never
granting the ``places`` that are never granted whole) and written by the policy writer."""
