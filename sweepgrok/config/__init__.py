"""What a user writes and what it means: the trial config (trial), YAML reading (yamlfile), grid
files (grid_file), search files (search_file), the task registry (tasks) and the generated
docs/config.md (docs: ``python -m sweepgrok.config.docs``). No torch at import time."""
