"""Reading finished sweeps: survival curves and statistics (survival, stats, comparisons), tables,
figures (plots, drawn by curve_figures, distribution_figures and heatmap_figure on
figure_layout), the analysis report (reporting, html_report) and what `status` shows
(sweepstatus). The definitions and labels the tables and figures print."""
