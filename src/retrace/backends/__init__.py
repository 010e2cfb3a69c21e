"""Inference engines behind one interface (`Backend`); one file per engine.

`retrace.util.registry.BACKENDS.get(name)` returns the class; heavy imports happen inside it.
"""
