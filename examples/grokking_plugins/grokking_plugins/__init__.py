"""Example sweepgrok plugins (docs/extending.md): ``plugin_parity``, sparse parity as a task
from outside sweepgrok, and ``small_mlp``, a one-hidden-layer MLP on the input tokens."""
