"""Publish a finished run as a Provenance Run Crate and verify one offline.

    retrace export --results results --out run.crate.zip [--include-generations]
    retrace audit --crate run.crate.zip

`collect` reads the run's provenance records, `crate` writes the RO-Crate (with ro-crate-py)
and `verify` checks a crate without the results directory. See README "Publishing a run".
"""
