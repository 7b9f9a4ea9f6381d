"""``service.__main__.settle_heap``, which the server process runs once its app is built: what is
alive then leaves the cyclic collector's sight, what comes later is still collected."""

from __future__ import annotations

import subprocess
import sys

from repo_root import REPO, python_env

PROGRAM = """
import gc, weakref
from service.__main__ import settle_heap
from service.app import create_app
from service.settings import Settings

app = create_app(Settings())
before = len(gc.get_objects())
settle_heap()
unfrozen = len(gc.get_objects())

class Cycle:
    pass

cycle = Cycle()
cycle.me = cycle  # garbage only the cyclic collector can free
gone = weakref.ref(cycle)
del cycle
gc.collect()
print(gc.get_freeze_count() > 0.9 * before, unfrozen < before // 100, gone() is None, gc.get_threshold())
"""


def test_the_app_s_objects_are_frozen_and_later_garbage_is_still_collected() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], cwd=REPO, env=python_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True", "(10000,", "20,", "20)"]
