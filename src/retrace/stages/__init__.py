"""One module per workflow stage; each exposes `run(...)`, called by retrace.cli.

Stages read their inputs, call library code, write their artifact atomically and then
its provenance record. They hold no method or scoring logic of their own.
"""
