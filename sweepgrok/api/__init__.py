"""The Python API (``import sweepgrok as sg``): what each command does, as functions.

``running`` trains and sweeps (``train``, ``launch``, ``search``), ``reading`` reads and
analyses sweep folders (``read_runs``, ``read_metrics``, ``analyze``, ``report``). The command
line calls these same functions where its work starts; it adds the printing, the exit codes
and the continue commands. Every user mistake raises sweepgrok.config.trial.ConfigError, its
message the line the command line prints after ``error:``. Heavy libraries are imported inside
the functions: the command line imports this layer and must start fast.
"""
