"""Scoring stored models with numpy and scipy only: used by the API (predict, evaluate) and the workers."""
