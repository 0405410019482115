"""The `sim` provider: the offline tutor, student and judge, its embeddings, and the behaviours plug-ins add."""
