#!/usr/bin/env python3
"""Print the layouts of sampler/python/layouts.py's TABLES from interpreters' own DWARF.

    .venv/bin/python scripts/python-layouts.py ~/.pyenv/versions/3.*/lib/libpython3.*.so.1.0

Each file's version is read from its name (libpython3.X or python3.X). The tests check the tables
against every interpreter here with DWARF (tests/integration/test_python_layouts.py).
"""

import re
import sys

from elftools.elf.elffile import ELFFile

from sampler.python.dwarflayout import layout_of

for path in sys.argv[1:]:
    found = re.search(r"python(\d)\.(\d+)", path)
    if found is None:
        sys.exit(f"{path}: no python3.X in its name")
    version = (int(found.group(1)), int(found.group(2)))
    with open(path, "rb") as f:
        table = layout_of(ELFFile(f), version)
    print(f"    {version}: {{")
    items = [f'"{key}": {value}' for key, value in table.items()]
    line = "       "
    for item in items:
        if len(line) + len(item) + 2 > 110:
            print(line.rstrip())
            line = "       "
        line += " " + item + ","
    print(line.rstrip())
    print("    },")
