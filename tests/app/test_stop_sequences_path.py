"""Stop sequences take one path in the controller (``set_stops``), from the stop box and from the
command line alike: before the first model is asked for they are only kept (the Load carries them),
after it they go to the engine."""

from __future__ import annotations

from app.protocol import messages as p

from .test_controller import answer, controller  # noqa: F401  (the fixture: a controller over a fake engine)


def test_stops_set_before_the_first_load_go_with_it(controller):  # noqa: F811
    failed = []
    controller.failed.connect(failed.append)
    controller.set_stops(("Paris", "\n"))
    assert controller.engine.sent == [] and failed == []  # nothing the engine would refuse ("no model is loaded yet")
    controller.load(None, prompt="The cat")
    (load,) = controller.engine.sent
    assert isinstance(load, p.Load) and load.stop_sequences == ("Paris", "\n")
    answer(controller.engine)
    controller.set_stops(("mat",))  # a model is loaded: the engine gets them at once
    assert controller.engine.sent[-1] == p.SetStops(generation=controller.engine.sent[-1].generation, sequences=("mat",))
    assert controller.stop_sequences == ("mat",)
