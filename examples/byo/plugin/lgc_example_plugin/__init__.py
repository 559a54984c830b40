"""An outside package with one compression method for the LGC testbed (`int8ef`)."""
