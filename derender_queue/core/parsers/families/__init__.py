"""Engine parser families, one module each; importing this package imports
(and so registers) every module in it.  To add one, see docs/parsers.md.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
