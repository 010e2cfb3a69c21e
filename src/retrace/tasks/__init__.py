"""Task plugins: one module per dataset family, each registering its tasks in `TASKS`.

Modules whose names start with "_" hold shared helpers and are not discovered as plugins.
"""
