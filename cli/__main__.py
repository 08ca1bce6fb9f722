"""``python -m scalify_hlo.cli`` runs the command line."""

from scalify_hlo.cli.main import main

main()
