"""A Flower app for tests: known bytes and FLOPs (see pyproject.toml)."""
SEEN = {"server": [], "client": []}
