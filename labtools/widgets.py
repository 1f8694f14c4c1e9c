"""What the live widgets share: knowing when nobody is there to move them."""
from __future__ import annotations

import os


def unattended(what: str) -> bool:
    """True, after saying so, while nbgrader runs the notebook (autograde, validate): a widget would wait for a
    person who is not there, and nbclient has been seen to stall a full cell timeout on one. The course's own widget
    cells are skipped then anyway (nbclient's ``skip-execution`` tag); this covers a learner's extra call."""
    if not os.environ.get("NBGRADER_EXECUTION"):
        return False
    print(f"({what} is interactive: it runs when you run this cell in JupyterLab, not while the notebook is graded.)")
    return True
