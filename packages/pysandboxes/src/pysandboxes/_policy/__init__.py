"""The policy engine: the .py-sandboxes rule file as data, its parser, verdicts and writer."""
