"""Plug-in file readers go through the engine's guarded reader: no FIFO hang, no /dev/zero read, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import ScenarioError
from personas.case_retrieval import _embeddings
from personas.tutorcasebench import _read_json


@pytest.mark.parametrize("target", ["/dev/zero", "directory", "fifo", "loop"])
@pytest.mark.parametrize("source", ["tutorcasebench", "vectors"])
def test_plug_in_sources_use_the_guarded_reader(tmp_path: Path, target: str, source: str) -> None:
    """The TutorCaseBench item source and casebench's vectors file refuse what the scenario reader refuses."""
    if target == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    elif target == "loop":
        path = tmp_path / "loop"
        path.symlink_to(path)
    else:
        path = tmp_path if target == "directory" else Path(target)
    with pytest.raises(ScenarioError, match="not a regular file|is a directory|cannot read"):
        if source == "vectors":
            _embeddings(["a"], ["text"], path)
        else:
            _read_json(path)
