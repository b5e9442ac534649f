"""Subcommands of the ``ctcalc`` console script; each module has add_arguments(parser) and run(args)."""
