"""The experiment file's schema as a whole: every key, read from the tables that validate files
(`keys`), for `testbed keys` and the configuration reference."""
