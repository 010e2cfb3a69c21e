"""Layer 1, util: small helpers with no retrace imports above them (atomic writes, hashing, YAML, frozen views, records, the plugin registry, templates, progress, stop signals).

Map and rules: docs/development/architecture.md.
"""
