"""What a program learns of the interpreter it runs on, by the names it was started with."""

import os
import platform
import sys
import sysconfig

real = os.path.realpath(sys.executable)
print(os.path.basename(real).startswith("python3"), os.path.samefile(sys.executable, real))
print(platform.libc_ver(sys.executable)[0])  # reads the binary, by the name it was run by
print(platform.python_implementation(), sysconfig.get_config_var("LIBDIR") is not None)
print(os.path.isfile(os.path.join(sys.prefix, "pyvenv.cfg")) == (sys.prefix != sys.base_prefix))
