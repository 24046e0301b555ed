"""Promotion: the rubric's stages, its evidence, CI results and the gate config."""
