"""Scoring: turn a generation artifact into numbers, with uncertainty.

- `vote.py`    plurality vote over answers grouped by the task's `same_answer`
- `metrics.py` accuracy, maj@k (first k samples), pass@k (Chen et al. 2021), bootstrap CIs
- `stats.py`   paired comparisons of two methods on the same questions
- `score.py`   `score_generations(rows, problems, task, params)`: one score dict per job

Run the unit tests with `PYTHONPATH=src python -m pytest tests/unit/test_vote.py
tests/unit/test_metrics.py tests/unit/test_stats.py tests/unit/test_score.py`.
"""
