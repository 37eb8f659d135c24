"""Every configuration in docs/cluster/, checked offline against the installed dask.

No SLURM or Kubernetes here, so the checks go as far as the installed packages
let them: the YAML parses and has the documented form; every command line that a
configuration runs, or that the SLURM and Helm templates build from it, is parsed
by the installed ``distributed``'s own command-line parser (its click commands:
unknown flags, bad types and missing commands fail); memory sizes parse with
dask's parser; dask configuration keys exist in dask's schema; the Python files
compile. Issue 24: the configurations ran ``dask-worker`` and ``dask-scheduler``,
which distributed 2026.8 does not ship.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
import dask
import distributed
import jsonschema
import pytest
import yaml
from dask.utils import parse_bytes

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "docs" / "cluster"

#: The keys of dask-jobqueue's ``jobqueue.slurm`` configuration (its jobqueue.yaml, 0.9.0).
SLURM_KEYS = frozenset({
    "name", "cores", "memory", "processes", "python", "interface", "death-timeout",
    "local-directory", "shared-temp-directory", "extra", "worker-command",
    "worker-extra-args", "shebang", "queue", "account", "walltime", "env-extra",
    "job-script-prologue", "job-script-epilogue", "job-cpu", "job-mem", "job-extra",
    "job-extra-directives", "job-directives-skip", "log-directory", "scheduler-options"})


def dask_subcommand(name: str) -> click.Command:
    """The installed ``dask <name>`` command (distributed registers it as a dask_cli plugin)."""
    found = {e.name: e for e in entry_points(group="dask_cli")}
    assert name in found, f"`dask {name}` is not a command of the installed dask: {sorted(found)}"
    command = found[name].load()
    assert isinstance(command, click.Command)
    return command


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse a command line as ``dask scheduler|worker`` would; return the subcommand, params.

    ``argv`` starts with ``dask <sub>`` or ``python -m distributed.cli.dask_<sub>`` (what
    dask-jobqueue runs). Unknown flags and values of the wrong type raise click errors.
    """
    python_m = len(argv) > 2 and argv[1] == "-m"
    module = re.fullmatch(r"distributed\.cli\.dask_(\w+)", argv[2]) if python_m else None
    if argv[0] == "dask":
        sub, rest = argv[1], argv[2:]
    elif module is not None:
        sub, rest = module.group(1), argv[3:]
    else:
        raise AssertionError(f"{argv[0]!r} is not a command of the installed distributed "
                             "(it has `dask scheduler` and `dask worker`)")
    params = dask_subcommand(sub).make_context(f"dask {sub}", list(rest)).params
    assert params["preload_argv"] == ()
    if params.get("memory_limit") not in (None, "auto"):
        assert parse_bytes(params["memory_limit"]) > 0  # dask's parser takes the size
    return sub, params


def check_worker(argv: list[str], scheduler: str | None) -> dict[str, Any]:
    """A ``dask worker`` line; the scheduler positional must be the one expected.

    (``dask worker`` ignores unknown options until the positional arguments are
    filled: without an address, ``--bogus`` would be taken for the scheduler.)
    """
    sub, params = parse(argv)
    assert sub == "worker"
    assert params["scheduler"] == scheduler, argv
    return params


def test_the_installed_distributed_ships_dask_scheduler_and_worker_only() -> None:
    scripts = {e.name for e in entry_points(group="console_scripts")}
    assert "dask" in scripts
    # the reason for the fix; if a later distributed brings them back, nothing breaks
    assert not {"dask-scheduler", "dask-worker"} & scripts
    for name in ("scheduler", "worker"):
        assert dask_subcommand(name).name == name
    with pytest.raises(click.NoSuchOption, match="--bogus"):
        parse(["dask", "worker", "tcp://scheduler:8786", "--bogus", "1"])
    with pytest.raises(AssertionError):
        check_worker(["dask", "worker", "--bogus"], None)
    with pytest.raises(click.BadParameter, match="not a valid integer"):
        parse(["dask", "worker", "--nthreads", "two"])
    with pytest.raises(ValueError, match="Could not interpret"):
        parse(["dask", "worker", "--memory-limit", "7 gigs"])


def _yaml(name: str) -> Any:
    return yaml.safe_load((CLUSTER / name).read_text())


def _containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    assert set(pod) == {"spec"} or "spec" in pod
    yield from pod["spec"]["containers"]


def test_daskcluster_yaml_is_the_operators_resource_with_commands_that_exist() -> None:
    resource = _yaml("daskcluster.yaml")
    assert resource["apiVersion"] == "kubernetes.dask.org/v1"
    assert resource["kind"] == "DaskCluster"
    assert resource["metadata"]["name"]
    spec = resource["spec"]
    assert set(spec) <= {"worker", "scheduler", "idleTimeout"}
    assert isinstance(spec["worker"]["replicas"], int)
    (worker,) = _containers(spec["worker"])
    # the operator gives the worker DASK_SCHEDULER_ADDRESS: no address on the line
    params = check_worker(worker["args"], None)
    assert params["name"] == "$(DASK_WORKER_NAME)"  # the operator's variable
    mounts = {m["name"] for m in worker["volumeMounts"]}
    assert mounts <= {v["name"] for v in spec["worker"]["spec"]["volumes"]}
    (scheduler,) = _containers(spec["scheduler"])
    assert parse(scheduler["args"])[0] == "scheduler"
    ports = {p["name"]: p["containerPort"] for p in scheduler["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}  # dask scheduler's defaults
    for probe in ("readinessProbe", "livenessProbe"):
        assert scheduler[probe]["httpGet"]["port"] in ports
    service = spec["scheduler"]["service"]
    assert {p["targetPort"] for p in service["ports"]} <= set(ports)
    assert service["selector"]["dask.org/cluster-name"] == resource["metadata"]["name"]


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == name]


def _tree(name: str) -> ast.Module:
    source = (CLUSTER / name).read_text()
    compile(source, str(CLUSTER / name), "exec")  # it compiles (its packages are not here)
    return ast.parse(source)


def test_kubernetes_py_builds_the_cluster_from_daskcluster_yaml() -> None:
    tree = _tree("kubernetes.py")
    (call,) = _calls(tree, "KubeCluster")
    keywords = {k.arg for k in call.keywords}
    # the keyword-generated spec of dask-kubernetes runs dask-scheduler: the file instead
    assert "custom_cluster_spec" in keywords
    assert not keywords & {"worker_command", "image", "n_workers"}
    (with_name,) = _calls(tree, "with_name")
    named = ast.literal_eval(with_name.args[0])
    assert named == "daskcluster.yaml"
    assert (CLUSTER / named).is_file()
    namespace = next(k.value for k in call.keywords if k.arg == "namespace")
    assert ast.literal_eval(namespace) == _yaml(named)["metadata"]["namespace"]


def _helm_args(values: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The scheduler's and a worker's args, as the classic chart's templates render them.

    dask/helm-chart (June 2026), templates/dask-scheduler-deployment.yaml and
    dask-worker-deployment.yaml, for the values this file sets.
    """
    worker = values["worker"]
    scheduler = ["dask-scheduler", "--port=8786", "--dashboard-address=:8787"]
    limits = worker["resources"]["limits"]
    args = [worker["image"]["dask_worker"], "spatialdp-dask-scheduler:8786",
            "--nthreads", str(worker.get("threads_per_worker", limits["cpu"])),
            "--memory-limit", str(limits["memory"]),
            "--no-dashboard", "--dashboard-address", str(worker.get("portDashboard", 8790))]
    return scheduler, args + list(worker.get("extraArgs", []))


def test_helm_values_render_arguments_that_dask_accepts() -> None:
    values = _yaml("helm-values.yaml")
    assert set(values) <= {"scheduler", "worker", "jupyter", "webUI",
                           "additional_worker_groups"}
    scheduler, worker = _helm_args(values)
    # the chart runs dask-scheduler and dask-worker: the image's shims exec `dask <sub>`
    assert (scheduler[0], worker[0]) == ("dask-scheduler", "dask-worker")
    assert parse(["dask", "scheduler", *scheduler[1:]])[0] == "scheduler"
    check_worker(["dask", "worker", *worker[1:]], "spatialdp-dask-scheduler:8786")
    volumes = {v["name"] for v in values["worker"]["mounts"]["volumes"]}
    assert {m["name"] for m in values["worker"]["mounts"]["volumeMounts"]} <= volumes


def _shim_lines() -> str:
    """The Dockerfile lines of helm-values.yaml's comment, as one shell command."""
    text = (CLUSTER / "helm-values.yaml").read_text()
    lines = re.findall(r"^#   RUN (.*)$|^#    (&& .*)$", text, re.MULTILINE)
    command = " ".join(a or b for a, b in lines).replace(" \\", "")
    assert command.count("printf") == 2
    return command


def test_the_helm_shims_run_the_dask_commands(tmp_path: Path) -> None:
    command = _shim_lines().replace("/usr/local/bin", str(tmp_path))
    subprocess.run(["sh", "-c", command], check=True)
    env = {"PATH": f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    for shim, sub in (("dask-scheduler", "scheduler"), ("dask-worker", "worker")):
        out = subprocess.run([shim, "--help"], env=env, capture_output=True, text=True,
                             check=True, timeout=60).stdout
        assert out.startswith(f"Usage: dask {sub} ")


def _jobqueue_worker(settings: Mapping[str, Any]) -> list[str]:
    """The worker command dask-jobqueue builds from ``jobqueue.slurm`` settings.

    dask_jobqueue/core.py (0.9.0): ``python -m distributed.cli.dask_worker <address>
    --name --nthreads --memory-limit --nworkers --nanny --death-timeout
    --local-directory``, then ``--interface`` and the extra args.
    """
    processes = settings["processes"]
    memory = parse_bytes(settings["memory"]) // processes
    argv = [settings["python"], "-m", "distributed.cli.dask_worker", "tcp://10.0.0.1:8786",
            "--name", "dummy-name", "--nthreads", str(settings["cores"] // processes),
            "--memory-limit", f"{memory / 2**30:.2f}GiB", "--nworkers", str(processes),
            "--nanny"]
    if "death-timeout" in settings:
        argv += ["--death-timeout", str(settings["death-timeout"])]
    argv += ["--local-directory", settings["local-directory"]]
    return [*argv, *settings.get("worker-extra-args", []), "--interface",
            settings["interface"]]


def _dotted(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            yield from _dotted(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _dask_schema() -> dict[str, Any]:
    """dask's and distributed's configuration schemas, as one."""
    merged: dict[str, Any] = {"type": "object", "properties": {}}
    for package, name in ((dask, "dask-schema.yaml"), (distributed, "distributed-schema.yaml")):
        schema = yaml.safe_load((Path(package.__file__).parent / name).read_text())
        merged["properties"].update(schema["properties"])
    return merged


def test_jobqueue_yaml_is_dask_configuration_with_worker_flags_that_exist() -> None:
    config = _yaml("jobqueue.yaml")
    slurm = config["jobqueue"]["slurm"]
    assert set(slurm) <= SLURM_KEYS
    params = check_worker(_jobqueue_worker(slurm), "tcp://10.0.0.1:8786")
    assert params["nthreads"] * int(params["n_workers"]) == slurm["cores"]
    # the dask and distributed keys exist and have the schema's types
    rest = {k: v for k, v in config.items() if k != "jobqueue"}
    defaults: dict[str, Any] = {}
    for d in dask.config.defaults:
        defaults = dask.config.merge(defaults, d)
    missing = object()
    unknown = [k for k in _dotted(rest)
               if dask.config.get(k, default=missing, config=defaults) is missing]
    assert not unknown, f"not dask configuration keys: {unknown}"
    jsonschema.validate(rest, _dask_schema())


def _slurm_settings() -> dict[str, Any]:
    """The SLURMCluster(...) keywords of slurm.py, under dask-jobqueue's configuration names."""
    (call,) = _calls(_tree("slurm.py"), "SLURMCluster")
    return {k.arg.replace("_", "-"): ast.literal_eval(k.value) for k in call.keywords
            if k.arg is not None}


def test_slurm_py_runs_the_workers_of_jobqueue_yaml() -> None:
    settings = _slurm_settings()
    assert set(settings) <= SLURM_KEYS
    check_worker(_jobqueue_worker(settings), "tcp://10.0.0.1:8786")
    # "the same SLURM workers as slurm.py": the two files agree, key for key
    slurm = _yaml("jobqueue.yaml")["jobqueue"]["slurm"]
    shared = set(settings) & set(slurm)
    assert {k: settings[k] for k in shared} == {k: slurm[k] for k in shared}
    assert set(settings) ^ set(slurm) <= {"name", "death-timeout"}  # in the YAML only


def test_every_config_in_docs_cluster_is_checked() -> None:
    checked = {"daskcluster.yaml", "helm-values.yaml", "jobqueue.yaml", "kubernetes.py",
               "slurm.py"}
    assert {p.name for p in CLUSTER.iterdir()} == checked
    # no configuration runs the scripts distributed no longer ships, outside the shims
    for path in CLUSTER.iterdir():
        text = path.read_text()
        if path.suffix == ".yaml":
            text = "\n".join(line.split("#")[0] for line in text.splitlines())
            text = text.replace("dask_worker: dask-worker", "")  # the chart's shim, checked
        else:
            text = ast.unparse(ast.parse(text))  # code, without comments
            text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", text)
        assert not re.search(r"dask-(worker|scheduler)\b", text), path.name


def test_the_recipe_of_docs_scale_md_runs_commands_that_exist() -> None:
    page = (ROOT / "docs" / "scale.md").read_text()
    blocks = re.findall(r"^```(?:bash|console|sh)\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    lines = [line.split("#")[0].split() for block in blocks for line in block.splitlines()]
    commands = [argv for argv in lines if argv and argv[0] == "dask"]
    assert {argv[1] for argv in commands} == {"scheduler", "worker"}
    for argv in commands:
        if argv[1] == "worker":
            check_worker(argv, argv[2])
        else:
            parse(argv)
