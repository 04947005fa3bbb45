"""The sandboxed side: everything here runs inside the walls, in the sandboxed interpreter.

``bootstrap`` reads the spec, applies the kernel layer on itself, installs the guards
(``guards``) behind one ``enforce`` decision point (or the learning ``recorder``), and
hands over to the ``runner`` (a script, a module, a command, or the ``repl``). A change
here is where a mistake is most dangerous: the program can reach what it leaves behind.
"""
