"""End-to-end training in each precision mode: datasets, modes, the loop, reports."""
