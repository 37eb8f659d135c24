"""spatialdp._gc.collector_paused: the collector is off inside, restored after."""

from __future__ import annotations

import gc

import pytest

from spatialdp._gc import collector_paused


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the outer block restores it
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_exception_restores_the_collector() -> None:
    with pytest.raises(ZeroDivisionError), collector_paused():
        1 / 0  # noqa: B018
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_fleet_leaves_the_collector_on() -> None:
    from spatialdp.datasets import synthetic_fleet

    synthetic_fleet(100, rng=0)
    assert gc.isenabled()
