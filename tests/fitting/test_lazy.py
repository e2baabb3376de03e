"""`import sensorgym` does not load the fitting code or its scipy/allantools; `sensorgym.fit` does."""

from __future__ import annotations

import subprocess
import sys


def test_import_sensorgym_leaves_the_fitting_code_alone():
    code = (
        "import sys, sensorgym\n"
        "assert not {'scipy', 'allantools', 'sensorgym.fitting'} & set(sys.modules), sorted(sys.modules)\n"
        "from sensorgym.fitting.api import fit\n"
        "assert sensorgym.fit is fit\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
