"""A Field's own check and a table's rules: one place each, one line naming key, value and
what is allowed (the house error), whoever asks (the registry, the experiment file)."""
import re

import pytest

from nodes.compression.registry import build_scheme
from lgc_schema import Field, OptionError, Rule, check_table
from testbed.configuration.sections import validate
from testbed.errors import ConfigError

ODD = Field(5, int, min=1, check=lambda k: None if k % 2 else "an odd integer >= 1")
SPAN = {"lo": Field(0, int), "hi": Field(10, int)}
ORDERED = (Rule("hi", lambda t: None if t["hi"] > t["lo"] else f"> lo ({t['lo']})", needs=("lo",)),)


def test_a_fields_check_runs_after_its_type_and_bounds():
    assert ODD.validate("k", 7) == 7
    with pytest.raises(OptionError, match=r"^k = 4: must be an odd integer >= 1$"):
        ODD.validate("k", 4)
    with pytest.raises(OptionError, match=r"^k = 0: must be an integer >= 1$"):  # bounds first
        ODD.validate("k", 0)


def test_a_rule_names_its_key_and_sees_the_defaults():
    assert check_table("t", {"hi": 3}, SPAN, rules=ORDERED) == {"lo": 0, "hi": 3}
    with pytest.raises(OptionError, match=r"^t.hi = -1: must be > lo \(0\)$"):
        check_table("t", {"hi": -1}, SPAN, rules=ORDERED)        # lo from its default
    # a partial table without a key the rule reads skips the rule
    assert check_table("t", {"hi": -1}, SPAN, partial=True, rules=ORDERED) == {"hi": -1}


SHAPES = dict(n_workers=3, shapes=[(512,)], payload_bytes=400)


@pytest.mark.parametrize("options, line", [
    ({"ae_kernel": 4}, "compression.ae_kernel = 4: must be an odd integer in [1, 31]"),
    ({"ae_channels": "16,x"}, "compression.ae_channels = '16,x': must be 1 to 8 comma-separated"),
    ({"ae_channels": "16,16", "latent_ratio": 0.3},
     "compression.latent_ratio = 0.3: must be a multiple of 1/4 with 2 stride-2 layers"),
    ({"retrain_every": 4, "retrain_iterations": 4},
     "compression.retrain_iterations = 4: must be in [1, 3] with retrain_every = 4"),
    ({"leader": 3}, "compression.leader = 3: must be -1 (cyclic) or in [0, 2]"),
])
def test_lgc_options_refused_in_one_house_line(options, line):
    with pytest.raises(OptionError, match="^" + re.escape(line)):
        build_scheme("lgc_ps", options, **SHAPES)


def test_the_experiment_file_applies_the_methods_rules():
    raw = {"compression": {"method": "lgc_ps", "ae_refresh_every": 2, "decoders": "per_node"}}
    with pytest.raises(ConfigError, match=r"compression.ae_refresh_every = 2: must be 0 with "
                                          r"decoders = 'per_node'"):
        validate(raw)
    # the default retrain_every (0) lets any retrain_iterations through, as the schedule ignores it;
    # the old name `retrain_iters` is still taken for it (issue 23's deprecation path)
    assert validate({"compression": {"method": "lgc_ps", "retrain_iters": 9}}).compression.options[
        "retrain_iterations"] == 9
