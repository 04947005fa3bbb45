"""Learning mode: the child records (``recorder``), the trusted side writes (``rules``)."""
