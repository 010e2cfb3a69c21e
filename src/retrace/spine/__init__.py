"""The spine as a method family (retrace.config.families): the sampling methods, refinement and the
generate/score/claims stages the experiment's `runs:` list plans (retrace.planning.plan).

Its code stays where it always was (retrace.methods, retrace.stages, retrace.scoring); this
package holds only what the core asks of it (family.py) and the spine's own plan checks
(checks.py), so the core iterates over families for them as it does for DRR and ART.
"""
