"""What every layer uses: the user-error message style and exit codes (errors), and the Ctrl-C /
SIGTERM contract of long commands (interrupt). Imports nothing else of sweepgrok."""
