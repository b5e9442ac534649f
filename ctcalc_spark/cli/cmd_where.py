"""``ctcalc where submit|conf|locks``: paths inside the installed package, for spark-submit, for copying configs and
for rebuilding the tested set of dependencies."""
from __future__ import annotations

import argparse

from ctcalc_spark.where import PLACES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("place", choices=sorted(PLACES),
                        help="submit: the file to give spark-submit; conf: the folder of example configs; locks: the folder "
                             "of hash-locked sets and constraints.txt (the tested versions)")


def run(args: argparse.Namespace) -> int:
    print(PLACES[args.place]())
    return 0
