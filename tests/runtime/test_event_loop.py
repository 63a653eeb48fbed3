"""The optional uvloop: used when importable, asyncio's loop otherwise or when asked."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from meshsub.runtime.node import loop_factory


def test_fallback_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHSUB_EVENT_LOOP", raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # importing it raises ImportError
    assert loop_factory() is None


def test_uvloop_when_importable_unless_asyncio_is_forced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("uvloop")
    fake.new_event_loop = asyncio.new_event_loop  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", fake)
    monkeypatch.delenv("MESHSUB_EVENT_LOOP", raising=False)
    assert loop_factory() is asyncio.new_event_loop
    monkeypatch.setenv("MESHSUB_EVENT_LOOP", "asyncio")
    assert loop_factory() is None
