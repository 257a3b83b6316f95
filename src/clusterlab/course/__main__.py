"""``python -m clusterlab.course``: the student and instructor editions of the labs."""

import sys

from clusterlab.course.editions import main

if __name__ == "__main__":
    sys.exit(main())
