"""``ctcalc where submit|conf``: paths inside the installed package, for spark-submit and for copying configs."""
from __future__ import annotations

import argparse

from ctcalc_spark.where import PLACES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("place", choices=sorted(PLACES),
                        help="submit: the file to give spark-submit; conf: the folder of example configs")


def run(args: argparse.Namespace) -> int:
    print(PLACES[args.place]())
    return 0
