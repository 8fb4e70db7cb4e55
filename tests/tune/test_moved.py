"""A moved sweep folder: the saved grid generator's unstarted trials start in its new place.

The 0.1.0 fixture folder was written in a scratch folder that no longer exists; its generator
state still names that folder for the one trial that never started."""

from __future__ import annotations

import shutil
from pathlib import Path

from ray import cloudpickle

from sweepgrok.tune.moved import GENERATOR_STATES, rehome_generator_state, storage_contexts

FIXTURE = Path(__file__).parents[1] / "data" / "fixture_sweep_v0.1.0"


def saved_paths(tune: Path) -> set[str]:
    (state_file,) = tune.glob(GENERATOR_STATES)
    with state_file.open("rb") as f:
        return {ctx.storage_fs_path for ctx in storage_contexts(cloudpickle.load(f))}


def moved_copy(tmp_path: Path) -> Path:
    sweep = tmp_path / "elsewhere" / FIXTURE.name
    shutil.copytree(FIXTURE, sweep)
    return sweep / "tune"


def test_the_fixture_names_the_folder_of_its_launch(tmp_path: Path) -> None:
    # The spec of the generator and the unstarted trial's own copy: both found.
    assert saved_paths(moved_copy(tmp_path)) == {"/tmp/fixture-t8jugxy_/a/fixture_sweep_v0.1.0"}


def test_rehome_points_every_saved_context_at_the_present_folder(tmp_path: Path) -> None:
    tune = moved_copy(tmp_path)
    assert rehome_generator_state(tune) == 2  # the generator's spec + the one unstarted trial
    assert saved_paths(tune) == {tune.parent.resolve().as_posix()}
    assert sorted(p.name for p in tune.iterdir()) == sorted(
        p.name for p in (FIXTURE / "tune").iterdir()
    )  # rewritten in place, no temporary file left


def test_rehome_of_a_folder_that_did_not_move_rewrites_nothing(tmp_path: Path) -> None:
    tune = moved_copy(tmp_path)
    rehome_generator_state(tune)
    (state_file,) = tune.glob(GENERATOR_STATES)
    before = state_file.stat().st_mtime_ns
    assert rehome_generator_state(tune) == 0
    assert state_file.stat().st_mtime_ns == before


def test_a_damaged_state_file_is_left_to_tunes_own_restore(tmp_path: Path) -> None:
    tune = moved_copy(tmp_path)
    (state_file,) = tune.glob(GENERATOR_STATES)
    state_file.write_bytes(b"not a pickle")
    assert rehome_generator_state(tune) == 0
    assert state_file.read_bytes() == b"not a pickle"
