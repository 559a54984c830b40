"""`python -m testbed.reference [FOLDER]`: write the generated reference pages."""
import sys

from testbed.reference import main

sys.exit(main())
