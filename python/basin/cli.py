"""The `basin` command of an installed package: the command-line driver installed beside
the extension (basin/bin/basin), run with the same arguments."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "basin")
    if not os.path.exists(exe):
        sys.exit("basin: the command-line driver is not installed with this package (" + exe + ")")
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    if os.path.isdir(data):
        os.environ.setdefault("BASIN_DATA_DIR", data)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
