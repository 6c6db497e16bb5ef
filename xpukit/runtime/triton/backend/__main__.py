import sys

from xpukit.runtime.triton.backend import main

sys.exit(main())
