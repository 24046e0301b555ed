"""Test and demo tools: the scripted stand-in provider. Never imported by the engine or the gate."""
