"""Layer 2, store: what is kept on disk and how (the request cache, provenance records, shards, models and data sets materialised, hub locks).

Map and rules: docs/development/architecture.md.
"""
