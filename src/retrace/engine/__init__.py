"""Layer 4, engine: running requests on a model (the scheduler, the LLM facade, endpoints); the plugin packages backends, methods, tasks and tools belong to this layer too.

Map and rules: docs/development/architecture.md.
"""
