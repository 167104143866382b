"""``opal capture install|uninstall`` on the agents' settings files (opalgit/hooks/capture.py).

Install appends opal's hook after the user's own, installing twice changes nothing,
uninstall of an untouched file gives its bytes back and of an edited one keeps every
edit; a file that is not the JSON an agent reads is refused and left alone. The
stateful test runs install / uninstall / user edits in any order against a model of
what the user's settings are.
"""

from __future__ import annotations

import copy
import json
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from opalgit.errors import InputError
from opalgit.hooks import capture

PY = "/usr/bin/python3"
USER_HOOK = {"hooks": [{"type": "command", "command": "echo user-stop"}]}


def _records(tmp_path) -> str:
    return str(tmp_path / "records.json")


@pytest.mark.parametrize("agent", sorted(capture.AGENTS))
def test_install_twice_then_uninstall_gives_the_bytes_back(agent, tmp_path):
    spec = capture.AGENTS[agent]
    path = tmp_path / "settings.json"
    event = spec.EVENTS[0]
    original = ('{\n    "theme": "dark",\n    "hooks": {\n        "%s": [\n            {"matcher": "", "hooks": '
                '[{"type": "command", "command": "echo mine"}]}\n        ]\n    }\n}' % event).encode()
    path.write_bytes(original)
    cmd = PY
    first = capture.install_file(agent, "project", str(path), cmd, _records(tmp_path))
    assert first.action == "installed"
    after = path.read_bytes()
    data = json.loads(after)
    # the user's hook first, still there, then opal's; every event has opal's
    assert data["hooks"][event][0]["hooks"][0]["command"] == "echo mine"
    assert all(capture._is_ours(data["hooks"][ev][-1]["hooks"][0]) for ev in spec.EVENTS)
    assert data["theme"] == "dark" and b'\n    "theme"' in after  # the file's own indentation
    assert capture.install_file(agent, "project", str(path), cmd, _records(tmp_path)).action == "unchanged"
    assert path.read_bytes() == after
    assert capture.uninstall_file(agent, "project", str(path), _records(tmp_path)).action == "restored"
    assert path.read_bytes() == original  # no trailing newline either, as it was
    assert capture.uninstall_file(agent, "project", str(path), _records(tmp_path)).action == "absent"
    assert path.read_bytes() == original


def test_a_file_that_was_not_there_goes_with_the_folders_opal_made(tmp_path):
    path = tmp_path / "proj" / ".claude" / "settings.json"
    (tmp_path / "proj").mkdir()
    capture.install_file("claude", "project", str(path), PY, _records(tmp_path))
    assert path.exists()
    assert capture.uninstall_file("claude", "project", str(path), _records(tmp_path)).action == "restored"
    assert os.listdir(tmp_path / "proj") == []


def test_an_edit_after_install_is_kept_by_uninstall(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {"Stop": [USER_HOOK]}}, indent=2) + "\n")
    capture.install_file("claude", "user", str(path), PY, _records(tmp_path))
    data = json.loads(path.read_text())
    data["model"] = "opus"
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo later"}]})
    path.write_text(json.dumps(data, indent=2) + "\n")
    assert capture.uninstall_file("claude", "user", str(path), _records(tmp_path)).action == "removed"
    assert json.loads(path.read_text()) == {
        "hooks": {"Stop": [USER_HOOK, {"hooks": [{"type": "command", "command": "echo later"}]}]}, "model": "opus"}


def test_another_opal_installation_is_replaced_in_place(tmp_path):
    path = tmp_path / "settings.json"
    capture.install_file("gemini", "user", str(path), "/old/python", _records(tmp_path))
    assert capture.file_status("gemini", "user", str(path), PY).state == "outdated"
    ch = capture.install_file("gemini", "user", str(path), PY, _records(tmp_path))
    assert ch.action == "updated"
    text = path.read_text()
    assert "/old/python" not in text and text.count("capturehook.sh") == len(capture.AGENTS["gemini"].EVENTS)
    assert capture.uninstall_file("gemini", "user", str(path), _records(tmp_path)).action == "restored"
    assert not path.exists()  # there was no file before the first install


@pytest.mark.parametrize("text,what", [
    (b'{"hooks": {"Stop": [}', "not valid JSON"),
    (b"[1, 2]", "is not a JSON object"),
    (b'{"hooks": []}', '"hooks" is not a JSON object'),
    (b'{"hooks": {"Stop": {"command": "x"}}}', '"hooks"."Stop" is not a list'),
    (b"", "not valid JSON"),
    (b"\xff\xfe{}", "not valid JSON"),
])
def test_a_broken_settings_file_is_refused_and_left_alone(tmp_path, text, what):
    path = tmp_path / "settings.json"
    path.write_bytes(text)
    with pytest.raises(InputError) as err:
        capture.install_file("claude", "project", str(path), PY, _records(tmp_path))
    assert str(path) in err.value.message and what in err.value.message
    assert "did not change it" in (err.value.hint or "")
    assert path.read_bytes() == text
    assert capture.file_status("claude", "project", str(path), "x").state == "invalid"


def test_a_linked_settings_file_stays_a_link(tmp_path):
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"theme": "light"}\n')
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    capture.install_file("claude", "user", str(link), PY, _records(tmp_path))
    assert link.is_symlink() and "capturehook.sh" in real.read_text()
    capture.uninstall_file("claude", "user", str(link), _records(tmp_path))
    assert link.is_symlink() and real.read_text() == '{"theme": "light"}\n'


# ------------------------------------------------------------------ install / uninstall / edits, in any order

EVENTS = list(capture.AGENTS["claude"].EVENTS) + ["UserPromptSubmit"]
user_hooks = st.builds(lambda n: {"hooks": [{"type": "command", "command": f"echo user-{n}"}]}, st.integers(0, 99))


class SettingsMachine(RuleBasedStateMachine):
    """The model: the user's settings (what the file holds without opal's hooks) and
    whether opal is installed; after every step the file is the model plus, when
    installed, opal's hook last on each event."""

    def __init__(self):
        super().__init__()
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="opal-capture-machine-")
        self.path = os.path.join(self.dir, "settings.json")
        self.records = os.path.join(self.dir, "records.json")
        self.cmd = PY
        self.model: dict | None = None  # None: no file
        self.installed = False
        self.untouched: bytes | None = None  # the bytes before install, while nobody edited since

    def _data(self):
        with open(self.path, "rb") as fh:
            return json.loads(fh.read())

    @rule(indent=st.sampled_from([None, 2, 4, "\t"]), hooks=st.lists(st.tuples(st.sampled_from(EVENTS), user_hooks),
                                                                       max_size=4))
    @precondition(lambda self: not self.installed)
    def user_writes_file(self, indent, hooks):
        data: dict = {"theme": "dark"}
        for ev, h in hooks:
            data.setdefault("hooks", {}).setdefault(ev, []).append(h)
        with open(self.path, "w") as fh:
            fh.write(json.dumps(data, indent=indent))
        self.model = copy.deepcopy(data)

    @rule()
    def install(self):
        before = open(self.path, "rb").read() if os.path.exists(self.path) else None
        ch = capture.install_file("claude", "user", self.path, self.cmd, self.records)
        if self.installed:
            assert ch.action == "unchanged"
            return
        assert ch.action == "installed"
        self.installed, self.untouched = True, before
        if self.model is None:
            self.model = {}

    @rule()
    def uninstall(self):
        ch = capture.uninstall_file("claude", "user", self.path, self.records)
        if not self.installed:
            assert ch.action == "absent"
            return
        if self.untouched is not None or ch.action == "restored":
            assert ch.action == "restored"
            if self.untouched is None:
                assert not os.path.exists(self.path)
                self.model = None
            else:
                assert open(self.path, "rb").read() == self.untouched
        else:
            assert ch.action == "removed"
        self.installed, self.untouched = False, None

    @rule(ev=st.sampled_from(EVENTS), h=user_hooks, key=st.sampled_from(["model", "theme", "env"]))
    @precondition(lambda self: self.installed)
    def user_edits_while_installed(self, ev, h, key):
        data = self._data()
        data[key] = f"edited-{key}"
        data.setdefault("hooks", {}).setdefault(ev, []).append(h)  # after opal's
        with open(self.path, "w") as fh:
            fh.write(json.dumps(data, indent=2))
        self.model[key] = f"edited-{key}"
        self.model.setdefault("hooks", {}).setdefault(ev, []).append(h)
        self.untouched = None

    @invariant()
    def file_matches_model(self):
        if self.model is None:
            assert not os.path.exists(self.path)
            return
        data = self._data()
        without, _ = capture.strip(data, keep=self.model)
        assert without == self.model
        state = capture.state_of(data, "claude", self.cmd)
        assert state == ("installed" if self.installed else "absent")
        if self.installed:  # opal's hook after every user hook that was there at install
            for ev in capture.AGENTS["claude"].EVENTS:
                cmds = [h.get("command") for g in data["hooks"][ev] for h in g["hooks"]]
                assert cmds.count(capture.hook_command("claude", PY, ev)) == 1

    def teardown(self):
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


TestSettingsMachine = SettingsMachine.TestCase
TestSettingsMachine.settings = settings(max_examples=150, stateful_step_count=12, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
