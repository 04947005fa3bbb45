"""The entry points behind the public names: partial mode (``decorator``: ``@sandbox``;
``partial``: ``sandboxes()``, ``run()``) and the layer report (``report``)."""
