"""``python -m pi_notebook.mcp serve ...`` (see :mod:`pi_notebook.mcp.serve`)."""

import sys

from pi_notebook.mcp.serve import main

if __name__ == "__main__":
    sys.exit(main())
