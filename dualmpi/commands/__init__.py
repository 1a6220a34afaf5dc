"""One module per ``dualmpi`` subcommand; each exposes ``add_parser(subparsers)`` and ``main(args)``."""

__all__ = []
