"""Layer 4, engine: running requests on a model (the scheduler, the cached LLM facade, the scorers a method calls); the plugin packages backends (below this package), methods, tasks and tools (above it) belong to this layer too.

Map and rules: docs/development/architecture.md.
"""
