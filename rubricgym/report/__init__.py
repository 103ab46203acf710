"""HTML reports of runs and trajectories: curves, groups, per-step credit as heat maps.

``rubricgym report PATH --out report.html``; the trainer refreshes ``report.html`` in its
run folder every ``run.report_every`` iterations (the live view). Needs the ``report`` extra
(jinja2, matplotlib).
"""

from rubricgym.report.build import REPORT_FILE, Report, build_report, render, write_report

__all__ = ["REPORT_FILE", "Report", "build_report", "render", "write_report"]
