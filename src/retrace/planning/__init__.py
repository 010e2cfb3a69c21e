"""Layer 5, planning: jobs, their rerun keys and code closures, sizes, cluster resources and preflight checks.

Map and rules: docs/development/architecture.md.
"""
