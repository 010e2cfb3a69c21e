"""Layer 8, app: user commands that drive the layers below (`retrace run`, `serve`, `rehearse`, `list`).

Map and rules: docs/development/architecture.md.
"""
