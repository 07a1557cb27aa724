"""The layout's import rules (ARCHITECTURE.md), checked on the source itself."""

from __future__ import annotations

import ast
import graphlib
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

from headgate._store import port

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = ("sqlalchemy", "alembic", "psycopg", "sqlite3")


def _modules() -> dict[str, set[str]]:
    """Every module of the package (projections included, by its installed name)
    and the modules it imports, absolute."""
    found: dict[str, set[str]] = {}
    for package_dir, name in (
        (ROOT / "headgate", "headgate"),
        (ROOT / "projections", "headgate._projections"),
    ):
        for path in package_dir.rglob("*.py"):
            if (
                "_projections" in path.relative_to(ROOT).parts[:2]
                and package_dir.name == "headgate"
            ):
                continue  # the symlink: counted under its real folder
            parts = list(path.relative_to(package_dir).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = ".".join([name, *parts])
            imports: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    imports.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module is not None:
                    imports.add(node.module)
                    imports.update(f"{node.module}.{alias.name}" for alias in node.names)
            found[module] = imports
    return found


MODULES = _modules()


def _importing(prefix: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        module: sorted(i for i in imports if i.startswith(forbidden))
        for module, imports in MODULES.items()
        if module == prefix or module.startswith(prefix + ".")
        if any(i.startswith(forbidden) for i in imports)
    }


def _import_edges() -> dict[str, set[str]]:
    """Each module and the modules it imports (TYPE_CHECKING imports included): a
    `from package import name` imports the submodule `name` when there is one,
    else the package; a module's import of its own package is no circle (the
    package is already loading)."""
    paths = {
        module: path
        for package_dir, name in (
            (ROOT / "headgate", "headgate"),
            (ROOT / "projections", "headgate._projections"),
        )
        for path in package_dir.rglob("*.py")
        if package_dir.name != "headgate" or "_projections" not in path.relative_to(ROOT).parts
        for module in [".".join([name, *path.relative_to(package_dir).with_suffix("").parts])]
    }
    paths = {module.removesuffix(".__init__"): path for module, path in paths.items()}

    def owner(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(owner(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                targets.update(
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in paths
                    else owner(node.module)
                    for alias in node.names
                )
        edges[module] = {
            target
            for target in targets
            if target is not None
            and target != module
            and not (paths[target].name == "__init__.py" and module.startswith(f"{target}."))
        }
    return edges


def test_no_import_circles_among_headgates_modules() -> None:
    """Every module can be read (and loaded) after the modules it imports: no two
    import each other, however far round, TYPE_CHECKING imports included."""
    edges = _import_edges()
    assert len(edges) > 200
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as circle:
        raise AssertionError(f"an import circle: {' -> '.join(circle.args[1])}") from None


def test_the_modules_were_found() -> None:
    assert "headgate._store.port" in MODULES and "headgate._projections.jobs" in MODULES


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # The domain is pure: no storage, no actors, no logging, nothing above it.
        (
            "headgate._domain",
            (
                *DRIVERS,
                "pykka",
                "structlog",
                "headgate._store",
                "headgate._runtime",
                "headgate._projections",
                "headgate._app",
                "headgate._commands",
                "headgate.web",
            ),
        ),
        # Projections are folds of domain events.
        (
            "headgate._projections",
            (*DRIVERS, "pykka", "headgate._store", "headgate._runtime", "headgate._app"),
        ),
        # The port and the mapper know no database.
        ("headgate._store.port", DRIVERS),
        ("headgate._store.mapper", DRIVERS),
        # The memory store is a second implementation of the port, not a use of the first.
        ("headgate._store.memory", (*DRIVERS, "headgate._store.sql")),
        # The runtime and the commands use the store through its port only.
        ("headgate._runtime", (*DRIVERS, "headgate._store.sql")),
        ("headgate._commands", (*DRIVERS, "headgate._store.sql")),
        ("headgate.web", (*DRIVERS, "headgate._store")),
        # The API's bodies serve the web and the command line: they know neither.
        ("headgate._wire", (*DRIVERS, "headgate._store", "headgate.web", "headgate.cli")),
        # The facade's parts share the Core, never the object that composes them.
        ("headgate._core", (*DRIVERS, "headgate._store.sql", "headgate._app")),
        ("headgate._facade", (*DRIVERS, "headgate._store.sql", "headgate._app", "headgate.web")),
        ("headgate._operator", (*DRIVERS, "headgate._store.sql", "headgate._app", "headgate.web")),
    ],
)
def test_what_each_layer_may_not_import(package: str, forbidden: tuple[str, ...]) -> None:
    assert _importing(package, forbidden) == {}


def _users_of(package: str) -> set[str]:
    """Modules outside `package` that import from it."""
    return {
        module
        for module, imports in MODULES.items()
        if not module.startswith(package) and any(i.startswith(package) for i in imports)
    }


def test_only_the_sql_adapter_knows_a_database_and_only_store_opening_picks_a_store() -> None:
    """`_store.opening` picks the implementation by URL for the composition roots;
    `ops` (store maintenance) is SQL's own. The Django integration's `connection`
    lends Django's own DBAPI connection to SQLAlchemy (an enqueue in Django's
    transaction), so it knows SQLAlchemy too, but not the SQL store."""
    drivers = _importing("headgate", DRIVERS)
    lends = "headgate.contrib.django.connection"
    assert {m for m in drivers if not m.startswith("headgate._store.sql")} == {lends}
    assert [i for i in MODULES[lends] if i.startswith("headgate._store")] == []
    assert _users_of("headgate._store.sql") == {"headgate._store.opening", "headgate.ops"}
    assert _users_of("headgate._store.memory") == {"headgate._store.opening"}
    assert _users_of("headgate._store.opening") == {"headgate._app"}


def test_the_sql_stores_parts_depend_on_the_database_not_the_store() -> None:
    """The log, leases, worker rows, queries and compaction take a `Database`; only
    the maintenance functions (which run on a whole store) import the store."""
    assert _users_of("headgate._store.sql.store") - {"headgate._store.opening", "headgate.ops"} == {
        "headgate._store.sql.maintenance"
    }


def test_only_headgates_own_surfaces_call_the_operator_service() -> None:
    """Surface-only operations are not public: the web app, the command line and
    the Django backend share them (and the old names' table points at them)."""
    surfaces = ("headgate.web", "headgate.cli", "headgate.contrib")
    users = _users_of("headgate._operator") - {"headgate._app", "headgate._facade.old_names"}
    assert {user for user in users if not user.startswith(surfaces)} == set()


def test_only_the_metrics_module_knows_prometheus() -> None:
    """The runtime reports through its Recorder interface; headgate._metrics alone
    turns that (and the store's figures) into prometheus_client's metrics."""
    assert set(_importing("headgate", ("prometheus_client",))) == {"headgate._metrics"}


def test_only_the_web_the_wire_and_the_http_server_import_the_server_extra() -> None:
    """FastAPI, pydantic, Jinja and Swagger UI (the `server` extra) are imported by
    `headgate.web` and the API's bodies (`headgate._wire`, pydantic) alone, uvicorn
    by `_http_server` alone: the library, the workers, the store's commands and
    the command line run on the core install (the command line reaches the web
    package only through `serve`, and the bodies only with --json, lazily)."""
    from headgate._server_extra import SERVER_MODULES

    importing = _importing("headgate", tuple(SERVER_MODULES))
    outside = {
        module
        for module in importing
        if not module.startswith(("headgate.web", "headgate._wire"))
        and module != "headgate._http_server"
    }
    assert outside == set(), f"{sorted(outside)} import the server extra"


def test_only_the_http_server_knows_uvicorn() -> None:
    """`headgate serve`'s server and its slow-client protocol reach into uvicorn's
    httptools protocol: one module, so an upgrade that moves it breaks one place."""
    web_servers = ("uvicorn", "h11", "httptools")
    assert set(_importing("headgate", web_servers)) == {"headgate._http_server"}


def test_the_masking_rule_depends_on_nothing() -> None:
    """`_redact` is applied on every output path, the log processors' included:
    it imports nothing of Headgate's and no library, so it can be used anywhere."""
    assert {i.split(".")[0] for i in MODULES["headgate._redact"]} <= {
        *sys.stdlib_module_names,
        "__future__",
    }


DIALECT_MODULES = {
    Path("headgate/_store/sql/backends/sqlite.py"),
    Path("headgate/_store/sql/backends/postgresql.py"),
}


def test_dialect_names_appear_only_in_the_dialect_modules() -> None:
    """SQLite/PostgreSQL differences are decided once, each database's in its own module
    of `backends/`: no other module of the package (the backends' interfaces and
    their registry included) branches on a dialect or issues a dialect's own
    statements."""
    markers = (
        '== "postgresql"',
        "== 'postgresql'",
        '== "sqlite"',
        "== 'sqlite'",
        "get_backend_name() ==",
        "dialect.name ==",
        "PRAGMA ",
        "ALTER INDEX",
        "pg_",
        "with_for_update",
        "on_conflict_do_nothing",
    )
    offending = {
        str(path.relative_to(ROOT)): [marker for marker in markers if marker in path.read_text()]
        for folder in (ROOT / "headgate", ROOT / "projections")
        for path in folder.rglob("*.py")
        if path.relative_to(ROOT) not in DIALECT_MODULES and "_projections" not in path.parts
    }
    assert {path: found for path, found in offending.items() if found} == {}
    assert all((ROOT / module).is_file() for module in DIALECT_MODULES)


STDLIB = sys.stdlib_module_names


def _closure(module: str) -> set[str]:
    """Every module `module` imports, directly or through the package's own modules."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        current = pending.pop()
        for imported in MODULES.get(current, ()):
            if imported in seen:
                continue
            seen.add(imported)
            if imported in MODULES:
                pending.append(imported)
    return seen


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        ("headgate._domain", {"croniter", "headgate"}),
        ("headgate._projections", {"croniter", "headgate"}),
    ],
)
def test_pure_layers_reach_nothing_but_the_stdlib_and_croniter(
    package: str, allowed: set[str]
) -> None:
    """Transitively: what the domain and the projections import, and what that imports."""
    for module in (m for m in MODULES if m == package or m.startswith(package + ".")):
        reached = {name.split(".")[0] for name in _closure(module)}
        outside = reached - STDLIB - allowed
        assert outside == set(), f"{module} reaches {sorted(outside)}"
        inner = {name for name in _closure(module) if name.startswith("headgate.")}
        assert {
            name for name in inner if name.startswith(("headgate._store", "headgate._runtime"))
        } == set(), f"{module} reaches {sorted(inner)}"


def _imports_at_load(module: str) -> set[str]:
    """What `module` imports when it is loaded: its body's imports, not those
    inside its functions (a lazy import) nor under `if TYPE_CHECKING:`."""
    package_dir, name = (
        (ROOT / "projections", "headgate._projections")
        if module.startswith("headgate._projections")
        else (ROOT / "headgate", "headgate")
    )
    relative = Path(*module.removeprefix(name).lstrip(".").split("."))
    path = package_dir / relative.with_suffix(".py")
    if not path.is_file():
        path = package_dir / relative / "__init__.py"
    found: set[str] = set()
    pending: list[ast.AST] = list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return found


CLI = "headgate.cli"
CLI_MAY_IMPORT = (
    CLI,
    # the facade, and the services the surfaces share beside it
    "headgate._app",
    "headgate._operator",
    "headgate.ops",
    "headgate._run_reads",
    "headgate._history",
    "headgate._actors",
    # the domain, its read types and errors
    "headgate._domain",
    "headgate._model",
    "headgate._errors",
    "headgate._json",
    # what a process's command line is made of
    "headgate._logs",
    "headgate._redact",
    "headgate._progress",
    "headgate._version",
    "headgate._server_extra",
    "headgate._serving",
    "headgate._worker_flags",
    "headgate._runtime.config",
    # lazily, below: the API's bodies (--json) and the server (`serve`)
    "headgate._wire",
    "headgate.web",
    "headgate._http_server",
)
CLI_LAZY = ("headgate._wire", "headgate.web", "headgate._http_server")
SERVE = "headgate.cli._serve"


def _cli_modules() -> list[str]:
    return [module for module in MODULES if module == CLI or module.startswith(CLI + ".")]


def test_the_command_line_uses_the_facade_and_the_domain_never_the_store() -> None:
    """The command line is a surface beside the web: it reads and writes through
    the `Headgate` facade, the read services and `ops`, prints the domain's types,
    and never reaches the stores, the commands or the runtime's parts."""
    outside = {
        module: sorted(
            name
            for name in MODULES[module]
            if name.startswith("headgate.")
            and not name.startswith(tuple(f"{allowed}." for allowed in CLI_MAY_IMPORT))
            and name not in CLI_MAY_IMPORT
        )
        for module in _cli_modules()
    }
    assert {module: names for module, names in outside.items() if names} == {}
    assert _importing(CLI, (*DRIVERS, "headgate._store", "headgate._commands")) == {}


def test_the_command_line_imports_the_bodies_and_the_server_only_when_it_needs_them() -> None:
    """A plain command starts without pydantic or FastAPI (the core install runs
    it): the bodies are imported where --json prints one, the web package and the
    HTTP server where `serve` starts them, and only there."""
    at_load = {
        module: sorted(name for name in _imports_at_load(module) if name.startswith(CLI_LAZY))
        for module in _cli_modules()
    }
    assert {module: names for module, names in at_load.items() if names} == {}
    server = ("headgate.web", "headgate._http_server")
    assert {m for m in _cli_modules() if any(i.startswith(server) for i in MODULES[m])} == {SERVE}


def test_only_serve_imports_the_web_package() -> None:
    """What the web and the command line share (the API's bodies) is in
    `headgate._wire`; outside the web package only `serve` imports it, to start it."""
    assert _users_of("headgate.web") == {SERVE}


LARGEST_LINES = 600
LARGE_MODULES = {
    "headgate/_store/sql/backends/postgresql.py": "PostgreSQL's dialect, kept in one module "
    "by the dialect rule (test_dialect_names_appear_only_in_the_dialect_modules)",
}
"""Product modules over LARGEST_LINES lines, each with the reason it still is."""


def test_no_product_module_is_over_600_lines_but_those_listed() -> None:
    """A module that grows past 600 lines is split (as the command line was, one
    module per noun), or listed with its reason; a listed one that shrank below
    is taken off the list."""
    lines = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for folder in (ROOT / "headgate", ROOT / "projections")
        for path in folder.rglob("*.py")
        if "_projections" not in path.relative_to(ROOT).parts
    }
    over = {path: count for path, count in lines.items() if count > LARGEST_LINES}
    assert sorted(set(over) - set(LARGE_MODULES)) == [], "split them, or list them with why"
    assert sorted(set(LARGE_MODULES) - set(over)) == [], "no longer over: take them off"


_PORT_ENTRY = re.compile(r"`(\w+)`(?: \([^)]*\))?: ((?:`\w+\*?`(?: \([^)]*\))?(?:, |; )?)+)")


def _port_table() -> dict[str, set[str]]:
    """ARCHITECTURE.md's storage port table: each interface it names, with the
    methods it lists (`append*`: every method of that prefix)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## The storage port, by capability", 1)[1].split("\n## ", 1)[0]
    named: dict[str, set[str]] = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| Capability", "|---")):
            for entry in _PORT_ENTRY.finditer(line):
                named[entry.group(1)] = set(re.findall(r"`(\w+\*?)`", entry.group(2)))
    return named


def test_the_port_table_names_every_method_of_each_interface() -> None:
    """The table a newcomer reads to find a storage operation says what the port's
    interfaces declare: every abstract method listed, nothing listed that is gone."""
    interfaces = {
        name: kind
        for module_info in pkgutil.iter_modules(port.__path__)
        for name, kind in vars(
            importlib.import_module(f"{port.__name__}.{module_info.name}")
        ).items()
        if inspect.isclass(kind) and kind.__module__.startswith(port.__name__)
    }
    table = _port_table()
    assert len(table) >= 12, table
    for name, listed in table.items():
        assert name in interfaces, f"ARCHITECTURE.md names {name}, which the port does not have"
        kind = interfaces[name]
        prefixes = tuple(entry[:-1] for entry in listed if entry.endswith("*"))
        unlisted = {
            method
            for method in getattr(kind, "__abstractmethods__", frozenset())
            if method not in listed and not method.startswith(prefixes or ("\0",))
        }
        assert not unlisted, f"{name}: {sorted(unlisted)} not in ARCHITECTURE.md's port table"
        gone = {entry for entry in listed if not entry.endswith("*") and not hasattr(kind, entry)}
        assert not gone, f"{name}: {sorted(gone)} listed in ARCHITECTURE.md, not declared"
