"""The shared frame of the measurement scripts: arguments, environment, JSON.

A script in `benchmarks/` keeps only its measurement, `measure(args)`, which
returns the measured fields as a dict. `main` parses the command line, runs
the script on the backend it asks for, records the environment
(`keras_boost.bench.harness.environment()`), runs the measurement and writes

```
{"benchmark": name, "environment": {...}, "settings": {...}, **fields}
```

atomically as JSON (`--output`; a half-written file never replaces a good
one). A measurement's own `"environment"` and `"settings"` entries extend the
shared ones; a measurement written as a generator has every dict it yields
written at once (an interrupted run keeps what it measured), the last one
being the result.

Example:

```python
from benchmarks import runner


def parse_args(argv=None):
    parser = runner.parser("mine", __doc__, seeds=2, output="bench_results/mine_{backend}.json")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    return runner.parse(parser, argv, positive=("steps",))


def measure(args):
    return {"runs": [...]}


def main(argv=None):
    return runner.main("mine", measure, parse_args, argv)
```
"""

import argparse
import datetime
import inspect
import json
import os
import subprocess
import sys

from keras_boost.bench.arguments import require_positive

BACKENDS = ("tensorflow", "jax", "torch")


def parser(name, doc, *, seeds=None, seed=None, output=None, backends=BACKENDS):
    """An `ArgumentParser` for `python -m benchmarks.<name>` with the shared options.

    Args:
        name: the script's module name in `benchmarks/`.
        doc: its docstring; the first line is the description.
        seeds: the default of `--seeds` (how many seeds, from `--first-seed`);
            None: the script takes no seeds.
        seed: the default of `--seed`, for a script that runs one seed.
        output: the default of `--output` (`{backend}` is filled in); None:
            the result is written only when `--output` is given.
        backends: the backends the script runs on; the first is its default
            when it cannot run on `KERAS_BACKEND`.
    """
    result = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc.strip().split("\n")[0])
    result.add_argument("--backend", choices=backends,
                        help="the Keras backend to run on (default: KERAS_BACKEND, where the script supports it)")
    if seeds is not None:
        result.add_argument("--seeds", type=int, default=seeds, help=f"how many seeds to run (default {seeds})")
        result.add_argument("--first-seed", type=int, default=0,
                            help="the seeds run are first-seed .. first-seed + seeds - 1 (to add seeds to a run)")
    if seed is not None:
        result.add_argument("--seed", type=int, default=seed, help=f"the seed of the weights and data (default {seed})")
    result.add_argument("--child", help=argparse.SUPPRESS)  # `spawn`'s JSON arguments
    result.add_argument("--output", default=output,
                        help=f"where the JSON result goes (default {output})" if output
                        else "write the JSON result here (default: not written)")
    return result


def parse(parser, argv=None, positive=(), defaults=None, quick=None):
    """`parser.parse_args(argv)`, checked: seeds, and the options `positive` names must be >= 1.

    With `defaults` (and `quick`, for a script with `--quick`): every option
    they name that the command line left unset (None) takes its value from
    `quick` under `--quick`, else from `defaults`.
    """
    args = parser.parse_args(argv)
    preset = quick if getattr(args, "quick", False) else defaults
    for name, value in (preset or {}).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if getattr(args, "seeds", 1) < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if getattr(args, "first_seed", 0) < 0:
        parser.error(f"--first-seed must be >= 0, got {args.first_seed}")
    require_positive(parser, args, positive)
    return args


def seeds(args):
    """The seeds `--seeds` and `--first-seed` ask for, as a range."""
    return range(args.first_seed, args.first_seed + args.seeds)


def environment(**extra):
    """`keras_boost.bench.harness.environment()` (machine, backend, versions, load) and `extra`."""
    from keras_boost.bench.harness import environment as shared

    return {**shared(), **extra}


def write_json(path, result):
    """Writes `result` as indented JSON to `path` atomically, creating its folder."""
    from keras_boost.atomic_write import atomic_write

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))


def spawn(name, args, env=None, **changes):
    """Runs `child(args)` of `benchmarks.<name>` in a fresh process; returns what it returns.

    For measurements that need a fresh process (peak memory, devices fixed at
    start-up). The child gets the parent's arguments with `changes` (e.g.
    which part to run), prints its progress and, last, its result as JSON.

    Example:

    ```python
    big = runner.spawn("accumulation", args, part="big")
    ```
    """
    settings = json.dumps({**vars(args), **changes})
    environ = {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--child", settings], env=environ,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmarks.{name} child {changes} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    if lines[:-1]:
        print("\n".join(lines[:-1]), flush=True)
    return json.loads(lines[-1])


def _run_on(name, backend, argv, backends):
    """Starts the script again on `backend` (fixed when keras is imported) when it is not the current one."""
    current = os.environ.get("KERAS_BACKEND", "tensorflow")
    wanted = backend or (current if current in backends else backends[0])
    if wanted != current:
        os.execve(sys.executable, [sys.executable, "-m", f"benchmarks.{name}", *argv],
                  dict(os.environ, KERAS_BACKEND=wanted))


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def main(name, measure, parse_args, argv=None, backends=BACKENDS, report=None, child=None):
    """Runs one script: parse, backend, environment, `measure(args)`, JSON; returns the result dict.

    Args:
        name: the script's module name in `benchmarks/`.
        measure: `measure(args)`, the measured fields (a dict, or a generator of them).
        parse_args: `parse_args(argv)`, the script's parsed and checked arguments.
        argv: the command line (default `sys.argv[1:]`).
        backends: the backends the script runs on, as given to `parser`.
        report: `report(result)`, a text printed at the end (e.g. a Markdown table).
        child: `child(args)`, what a process started by `spawn` runs and returns.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(argparse.Namespace(**json.loads(args.child)))))
        return None
    _run_on(name, args.backend, argv, backends)
    env = environment(command=" ".join([f"python -m benchmarks.{name}", *argv]))
    print(f"benchmarks.{name} | backend {env['backend']} {env['backend_version']} | keras {env['keras_version']} | "
          f"keras_boost {env['keras_boost_version']} | {env['processor']} x{env['nproc']} | {env['date']} | "
          f"load {env['load_average']}", flush=True)
    settings = {key: value for key, value in vars(args).items() if key != "child"}
    result = {"benchmark": name, "environment": env, "settings": settings}
    output = args.output.format(backend=env["backend"]) if args.output else None
    measured = measure(args)
    for fields in measured if inspect.isgenerator(measured) else [measured]:
        fields = dict(fields)
        env.update(fields.pop("environment", {}))
        result["settings"].update(fields.pop("settings", {}))
        result.update(fields)
        if output:
            write_json(output, result)
    env.update(finished=_now(), load_average_after=list(os.getloadavg()) if hasattr(os, "getloadavg") else None)
    if report is not None:
        print(report(result))
    if output:
        write_json(output, result)
        print(f"Wrote {output}")
    return result
