"""The Dockerfile against README and the launch scripts (no Docker engine runs here).

The image must install exactly as a fresh machine does (README's commands, ``launch/setup``),
carry ``launch/ompi-env.sh`` as ENV lines, run as a non-root user, and start README's main job.
"""

import json
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
README = REPO / "README.md"


def instructions(path=DOCKERFILE):
    """The Dockerfile's instructions as (KEYWORD, argument text), continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def readme_section(title):
    """The text of README's ``## title`` section."""
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def code_blocks(text):
    """The fenced code blocks of a Markdown text, as lists of lines."""
    return [block.strip().splitlines() for block in re.findall(r"```\w*\n(.*?)```", text, re.S)]


def ompi_env_defaults():
    """``{name: default}`` of every variable launch/ompi-env.sh exports."""
    text = (REPO / "launch" / "ompi-env.sh").read_text()
    found = re.findall(r'^export (\w+)="\$\{\1:-([^}]*)\}"$', text, flags=re.M)
    names = re.findall(r"^export (\w+)=", text, flags=re.M)
    assert len(found) == len(names), "every ompi-env.sh line is export NAME=\"${NAME:-default}\""
    return dict(found)


def dockerfile_env():
    """``{name: value}`` of the Dockerfile's ENV lines (``ENV A=1 B=2`` form)."""
    env = {}
    for keyword, rest in instructions():
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def test_base_image_and_non_root_user():
    """FROM python:3.11-slim; a USER that is not root before the install and the command."""
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [i for i, (k, _) in enumerate(steps) if k == "USER"]
    assert users, "the image needs a non-root USER"
    assert all(steps[i][1] not in ("root", "0") for i in users)
    install = next(i for i, (k, v) in enumerate(steps) if k == "RUN" and "launch/setup" in v)
    assert users[0] < install
    assert any(k == "COPY" and "--chown=" in v for k, v in steps)


def test_env_lines_are_ompi_env_sh():
    """One ENV per launch/ompi-env.sh variable, with the same value."""
    assert dockerfile_env() == ompi_env_defaults()


def test_install_is_readme_and_launch_setup():
    """The image installs with README's command, which is what launch/setup runs."""
    runs = [v for k, v in instructions() if k == "RUN" and "launch/setup" in v]
    assert runs == ["bash launch/setup"]
    container = readme_section("Laptop, cluster or container")
    dockerfile_lines = [line for block in code_blocks(container) for line in block]
    assert "RUN bash launch/setup" in dockerfile_lines
    # README names the pip command launch/setup runs; launch/setup runs exactly that.
    stated = re.findall(r'`(pip install -e "\.\[([\w,]+)\]")`', container)
    assert stated, "README's container section states the pip install command"
    setup = (REPO / "launch" / "setup").read_text()
    assert re.search(r"mode=wheel-mpi extras=(\S+)", setup).group(1) == stated[0][1] == "mpi,test"
    assert 'pip install -q -e ".[$extras]"' in setup


def test_default_command_is_readme_main_job():
    """CMD runs README's main job, the first command of 'Two commands'."""
    cmd = [json.loads(v) for k, v in instructions() if k == "CMD"]
    assert cmd == [["bash", "launch/demo"]]
    first = code_blocks(readme_section("Two commands"))[0]
    assert first == [" ".join(cmd[0])]
    assert "docker run --rm dualmpi" in readme_section("Laptop, cluster or container")


def test_dockerignore_keeps_local_state_out():
    """.venv, .git and caches stay out of the build context."""
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert {".git", ".venv", "**/__pycache__", "*.egg-info"} <= set(ignored)
