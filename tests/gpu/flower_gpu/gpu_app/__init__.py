"""A Flower app for the GPU check (see pyproject.toml)."""
