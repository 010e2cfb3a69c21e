"""Layer 3, config: composing an experiment's settings (config groups, experiments, the method-family registry, the mirror's location).

Map and rules: docs/development/architecture.md.
"""
