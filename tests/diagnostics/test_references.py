"""The doctor is handed what it compares runs with (:mod:`rlx.diagnostics.references`): the
faces and the launcher install rlx's references, and the doctor never imports them."""

from __future__ import annotations

import json

import rlx
from rlx.cli import main
from rlx.diagnostics import rules
from rlx.diagnostics.doctor import doctor as bare_doctor
from rlx.diagnostics.references import NO_REFERENCES, current, using
from rlx.launch.references import BOOK
from tests.runs import toy_drift  # noqa: F401  (registers "toy-drift")


def test_with_nothing_installed_the_rules_have_nothing_to_compare_with():
    with using(NO_REFERENCES):
        assert rules.env_presets("ppo", "CartPole-v1") == []
        assert rules.published_reference("dqn", "CartPole-v1", 10**7) is None
        assert rules._default_of("ppo", "learning_rate") is None


def test_rlx_references_are_the_registry_and_the_zoo():
    with using(BOOK):
        whose = [who for who, _ in rules.env_presets("ppo", "CartPole-v1")]
        assert whose == ["rlx's", "rl-baselines3-zoo's"]
        assert [who for who, _ in rules.env_presets("sac", "MountainCarContinuous-v0")] == [
            "rl-baselines3-zoo's"
        ]
        agent = rules.published_reference("dqn", "CartPole-v1", 10**7)
        assert (agent.algo, agent.env_id) == ("dqn", "CartPole-v1")
        assert rules._default_of("ppo", "learning_rate") == 3e-4
        # another library's algorithm: nothing to compare with, no error
        assert rules.env_presets("someone-elses", "CartPole-v1") == []
        assert rules._default_of("someone-elses", "learning_rate") is None


def test_installing_is_scoped_and_nests():
    assert current() is not NO_REFERENCES  # this folder's tests run as the faces do
    with using(NO_REFERENCES):
        assert current() is NO_REFERENCES
        with using(BOOK):
            assert current() is BOOK
        assert current() is NO_REFERENCES


def test_every_face_hands_the_doctor_its_references(tmp_path, capsys):
    """A step 1,000 times the default blows the policy up: the fitted fix is capped at the
    default, which only the references know. The live doctor (summary.json), ``rlx.doctor``
    and ``rlx doctor`` agree; the doctor called bare, with nothing installed, fits the step
    to the KL alone."""
    run_dir = tmp_path / "r"

    def blowup(diagnosis):
        (found,) = [f for f in diagnosis.findings if f.rule.id == "policy-blowup"]
        return found.field, found.current, found.suggested

    with using(NO_REFERENCES):  # nothing installed by the caller: each face installs its own
        rlx.train("toy-drift", "X", run_dir=run_dir, total_steps=60, learning_rate=1000.0,
                  progress=False)  # fmt: skip
        face, bare = rlx.doctor(run_dir), bare_doctor(run_dir)
        assert main(["doctor", str(run_dir)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["doctor"] == [f.rule.id for f in face.findings]
    assert blowup(face) == ("learning_rate", 1000.0, 1.0)  # no higher than the default
    assert blowup(bare) == ("learning_rate", 1000.0, 10.0)  # 1000 x sqrt(0.02 / KL), clipped
    assert "learning_rate 1000.0 -> 1.0" in printed
