"""The configuration room: an experiment file (TOML) into a validated ExperimentConfig, one
module per job.

- schema: the sections' Field tables and the typed objects generated from them
- overrides: `--set KEY=VALUE` parsed and applied
- loading: files (or tables, or a stored run's config) read, overridden, resolved, validated;
  the one place that prints the notes of a load
- sections: each section checked, and `validate`
- method_policy: a method's collective on the topology, and the switch to its known-good values
- keys: every key, read from the tables that validate files, for `testbed keys` and the
  configuration reference
"""
