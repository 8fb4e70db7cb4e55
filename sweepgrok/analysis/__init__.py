"""Reading finished sweeps: survival curves and statistics (survival, stats, comparisons), tables,
figures (plots), the analysis report (reporting, html_report) and what `status` shows
(sweepstatus). The definitions and labels the tables and figures print."""
