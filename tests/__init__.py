"""The test suite; ``tests.helpers`` holds what its files share."""
