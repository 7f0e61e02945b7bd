import sys

from minicalc.cli import main

sys.exit(main())
