"""The CI lane of the randomized fault checker: a short seeded run of every setup.

`benchmarks/chaos.py` with a fixed seed, every setup at once (the effects setups
among them, and the fire policies' tasks), two
resident nodes and a `tick` each, 45 s of faults (70 s on the
effects setups, which have more kinds to inject; the full runs and their figures
are in docs/guarantees.md). Asserts no overlap and no fire run twice, that the
fires were real (some ran), and that every fault kind that applies to a setup was
actually injected: the nemesis's count, and for failing history writes a refusal
logged by a node, of a `start` and of a run's end among them; that every fire ran
or is recorded as skipped, with a reason; that every run that ran is recorded with
its real outcome; and that the effects setups committed effects and guarded writes
(their rules, effect once and guarded writes in token order, are among the
violations the first test refuses).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chaos import run_all
from chaos_harness.effects_setup import EFFECTS_SETUPS
from chaos_harness.run import SetupResult, table
from chaos_harness.setups import SETUPS

#: Its timing depends on the machine's load: runs alone under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

SEED = 8
FAULT_SECONDS = 45.0
#: The effects setups have more fault kinds, some aimed at a phase of a body: the
#: first round of every kind takes them longer.
EFFECTS_FAULT_SECONDS = 70.0
NODES = 2
#: Every task rate stretched 3 times: eleven setups share the CI machine.
PACE = 3.0


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
    postgres_url: str,
    mysql_url: str,
    monkeypatch_module: pytest.MonkeyPatch,
) -> dict[str, SetupResult]:
    monkeypatch_module.setenv("FIREFLY_TEST_POSTGRES_URL", postgres_url)
    monkeypatch_module.setenv("FIREFLY_TEST_MYSQL_URL", mysql_url)
    # An operator's steering (pause, resume, trigger, backfill) runs in the full runs;
    # this lane leaves it out, and its nodes read no control store: its three kinds
    # thin out a 45 s schedule, and some setups then see no history write of a kind
    # fail (docs/verification.md).
    monkeypatch_module.setenv("FIREFLY_CHAOS_STEERING", "0")
    root = tmp_path_factory.mktemp("chaos")
    longer = dict.fromkeys(EFFECTS_SETUPS, EFFECTS_FAULT_SECONDS)
    ran = run_all(list(SETUPS), SEED, FAULT_SECONDS, NODES, len(SETUPS), root, PACE, longer)
    print(table(ran))
    return {result.setup: result for result in ran}


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("setup", SETUPS)
def test_no_overlap_and_no_fire_run_twice_under_faults(
    results: dict[str, SetupResult], setup: str
) -> None:
    result = results[setup]
    broken = [v for v in result.violations if v["rule"] not in {"accounted", "recorded"}]
    assert broken == [], f"seed {SEED}, logs in {result.workdir}"
    assert result.fires > 0
    assert result.ran > 0


@pytest.mark.parametrize("setup", SETUPS)
def test_every_fire_ran_or_is_recorded(results: dict[str, SetupResult], setup: str) -> None:
    result = results[setup]
    unaccounted = [v["message"] for v in result.violations if v["rule"] == "accounted"]
    assert unaccounted == [], f"seed {SEED}, logs in {result.workdir}"


@pytest.mark.parametrize("setup", SETUPS)
def test_every_run_that_ran_is_recorded_with_its_real_outcome(
    results: dict[str, SetupResult], setup: str
) -> None:
    result = results[setup]
    unrecorded = [v["message"] for v in result.violations if v["rule"] == "recorded"]
    assert unrecorded == [], f"seed {SEED}, logs in {result.workdir}"
    assert result.recorded_fires > 0


@pytest.mark.parametrize("setup", SETUPS)
def test_every_applicable_fault_kind_was_injected(
    results: dict[str, SetupResult], setup: str
) -> None:
    result = results[setup]
    missing = [kind for kind in result.applicable if result.faults.get(kind, 0) == 0]
    assert missing == [], f"never injected on {setup}: {missing}; injected {result.faults}"
    assert result.history_refusals > 0, "no node ever saw a history write fail"
    refused = result.refused_writes
    assert refused.get("start", 0) > 0, f"no start failed: {refused}"
    assert refused.get("finish", 0) + refused.get("record_run", 0) > 0, f"no end failed: {refused}"


@pytest.mark.parametrize("setup", EFFECTS_SETUPS)
def test_the_effects_setups_committed_effects_and_guarded_writes(
    results: dict[str, SetupResult], setup: str
) -> None:
    effects = results[setup].effects
    assert effects["effect rows"] > 0, f"seed {SEED}: {effects}"
    assert effects["guarded writes"] > 0, f"seed {SEED}: {effects}"
