"""Backups and restore: schedules, retention, the Jobs' recipes and builders, their reconcile."""
