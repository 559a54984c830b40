"""`torchrun ... -m testbed.launch FILE`: the command a torchrun rank runs (docs/distributed.md);
the rank's program is testbed/distributed/rank_program.py."""
import sys

from testbed.distributed.rank_program import main

if __name__ == "__main__":
    sys.exit(main())
