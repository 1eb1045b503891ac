"""A dev container's Docker Compose files, read as the Compose specification reads them.

A configuration with `dockerComposeFile` names one of the files' services as the container
(`service`): its image or build is the clone's base, its variables the clone's. The other
services (all of them, or `runServices` and what they depend on) start beside the clone, on a
network of its own, and end with it. This module reads the files (YAML, several merged in order,
variables interpolated from the project's `.env` only: nothing of the owner's environment) into
one `Compose`; the launcher does the rest. Every key is either applied, named as not applied with
why, or ignored because it only matters to a host (published ports, restart policies); what
cannot work is refused in one line naming the file and the key.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import cattrs

from shadowclone.environment.compose_services import Service, ServiceReader
from shadowclone.environment.compose_yaml import (
    dotenv,
    fail,
    in_repository,
    interpolated,
    load,
    table,
)
from shadowclone.errors import BadInput

MAX_SERVICES = 32
SERVICE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


@attrs.frozen
class Compose:
    files: tuple[str, ...]
    """The Compose files, paths in the repository, in the order they merge."""
    service: Service
    """The clone's own service."""
    others: tuple[Service, ...] = ()
    """The services that start beside the clone, each after those it depends on."""
    not_applied: Mapping[str, str] = attrs.field(factory=dict)
    """`FILE: services.NAME.KEY` -> why a key that would change a service is not applied."""
    ignored: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = _CONVERTER.unstructure(self)
        return data

    @classmethod
    def from_json(cls, data: object) -> Compose:
        try:
            return _CONVERTER.structure(data, cls)
        except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as error:
            raise BadInput(f"not a Compose reading shadowclone made ({error})") from None


_CONVERTER = cattrs.Converter(forbid_extra_keys=True)


# ------------------------------------------------------------------ where the files are


def compose_files(source: str, configuration: Mapping[str, Any]) -> tuple[str, ...]:
    """The Compose files a configuration at `source` names, as paths in the repository."""
    named = configuration.get("dockerComposeFile")
    listed = [named] if isinstance(named, str) else named
    if not isinstance(listed, list) or not listed or len(listed) > 8:
        raise fail(f"{source}: dockerComposeFile", "a path or a list of at most 8 paths")
    folder = posixpath.dirname(source)
    where = f"{source}: dockerComposeFile"
    return tuple(dict.fromkeys(in_repository(where, folder, item) for item in listed))


def project_env_path(files: Sequence[str]) -> str:
    """The `.env` Compose reads its variables from: in the first file's folder."""
    return posixpath.join(posixpath.dirname(files[0]), ".env")


# ------------------------------------------------------------------ reading the YAML

# ------------------------------------------------------------------ the files merged


def _normalised(path: str, data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The services of one file, their lists that merge by key made mappings."""
    services = data.get("services")
    if services is None:
        return {}
    if not isinstance(services, dict) or len(services) > MAX_SERVICES:
        raise fail(f"{path}: services", f"a mapping of at most {MAX_SERVICES} services")
    found: dict[str, dict[str, Any]] = {}
    for name, written in services.items():
        if not isinstance(name, str) or not SERVICE_NAME.fullmatch(name):
            raise fail(f"{path}: services.{name}", "a service name (letters, digits, _ . -)")
        service = {} if written is None else written
        if not isinstance(service, dict):
            raise fail(f"{path}: services.{name}", "a mapping")
        found[name] = dict(service)
        for key in ("environment", "build"):
            if isinstance(service.get(key), list):
                found[name][key] = table(f"{path}: services.{name}.{key}", service[key])
        if isinstance(service.get("build"), dict) and isinstance(
            service["build"].get("args"), list
        ):
            args = table(f"{path}: services.{name}.build.args", service["build"]["args"])
            found[name]["build"] = {**service["build"], "args": args}
        if isinstance(service.get("depends_on"), list):
            found[name]["depends_on"] = {str(other): {} for other in service["depends_on"]}
    return found


def _merge(base: Any, override: Any) -> Any:
    """Compose's merge of two files: mappings key by key, anything else replaced, but the
    volumes of a service, added to."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if key == "volumes" and isinstance(value, list) and isinstance(base.get(key), list):
                merged[key] = [*base[key], *(item for item in value if item not in base[key])]
            else:
                merged[key] = _merge(base.get(key), value) if key in base else value
        return merged
    return override


def read(source: str, configuration: Mapping[str, Any], kept: Mapping[str, str]) -> Compose:
    """The Compose files a configuration at `source` names, read from `kept` (repository path
    -> text, as setup kept them), with its `service` and `runServices`."""
    files = compose_files(source, configuration)
    project = posixpath.dirname(files[0])
    env_path = project_env_path(files)
    variables = dotenv(env_path, kept[env_path]) if env_path in kept else {}
    merged: dict[str, dict[str, Any]] = {}
    written: dict[tuple[str, str], list[str]] = {}
    for path in files:
        if path not in kept:
            raise BadInput(f"{source}: dockerComposeFile: {path} is not a file of the repository")
        data = interpolated(load(path, kept[path]), variables, path)
        in_file = _normalised(path, data)
        for service, keys in in_file.items():
            for key, value in keys.items():
                earlier = written.get((service, key), [])
                merges = isinstance(value, dict) or (key == "volumes" and isinstance(value, list))
                written[(service, key)] = [*earlier, path] if merges else [path]
        merged = _merge(merged, in_file)
    name = configuration.get("service")
    if not isinstance(name, str) or name not in merged:
        listed = ", ".join(sorted(merged)) or "none"
        raise fail(f"{source}: service", f"a service of {', '.join(files)} (found: {listed})")
    reader = ServiceReader(files, project, kept, written)
    clone = reader.service(name, merged[name], clone=True)
    services = {
        other: reader.service(other, data, clone=False)
        for other, data in merged.items()
        if other != name
    }
    wanted = _run_services(source, configuration, merged, name)
    order = _start_order(source, {**services, name: clone}, wanted)
    return Compose(
        files=files,
        service=clone,
        others=tuple(services[other] for other in order if other != name),
        not_applied=reader.not_applied,
        ignored=tuple(sorted(reader.ignored)),
    )


def _run_services(
    source: str, configuration: Mapping[str, Any], merged: Mapping[str, Any], name: str
) -> list[str]:
    """The services that start: `runServices`, or all without a profile; and the clone's."""
    listed = configuration.get("runServices")
    if listed is None:
        return [name, *(other for other, data in merged.items() if not data.get("profiles"))]
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise fail(f"{source}: runServices", "a list of service names")
    for item in listed:
        if item not in merged:
            raise fail(f"{source}: runServices", f"services of the Compose files ({item}?)")
    return [name, *listed]


def _start_order(source: str, services: Mapping[str, Service], wanted: Sequence[str]) -> list[str]:
    """`wanted` and every service they need, each after what it needs."""
    order: list[str] = []
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            cycle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise BadInput(
                f"{source}: the Compose services depend on each other in a cycle ({cycle})"
            )
        service = services.get(name)
        if service is None:
            raise BadInput(f"{source}: a Compose service needs {name}, which is not defined")
        visiting.append(name)
        needed = list(service.depends_on)
        if service.network_mode and service.network_mode.startswith("service:"):
            needed.append(service.network_mode.removeprefix("service:"))
        for other in needed:
            visit(other)
        visiting.pop()
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def references(source: str, configuration: Mapping[str, Any], kept: Mapping[str, str]) -> list[str]:
    """What else setup copies besides the Compose files, once they are in `kept`: every
    Dockerfile a service is built from and its context's folder, and the env files."""
    found = read(source, configuration, {**kept, **_missing_env_files(source, configuration, kept)})
    paths: list[str] = []
    for service in (found.service, *found.others):
        if service.dockerfile is not None and service.context is not None:
            paths += [service.dockerfile, f"{service.context}/"]
    return paths


def env_files(source: str, configuration: Mapping[str, Any], kept: Mapping[str, str]) -> list[str]:
    """The env files the services read (paths in the repository), once the Compose files are
    in `kept`."""
    return sorted(_missing_env_files(source, configuration, kept))


def _missing_env_files(
    source: str, configuration: Mapping[str, Any], kept: Mapping[str, str]
) -> dict[str, str]:
    """Every env file named but not in `kept`, as an empty file (to read the rest before they
    are fetched)."""
    files = compose_files(source, configuration)
    project = posixpath.dirname(files[0])
    named: dict[str, str] = {}
    for path in files:
        if path not in kept:
            continue
        services = load(path, kept[path]).get("services")
        for service in (services or {}).values() if isinstance(services, dict) else ():
            value = service.get("env_file") if isinstance(service, dict) else None
            listed = [value] if isinstance(value, (str, dict)) else value or []
            for item in listed if isinstance(listed, list) else []:
                relative = item.get("path") if isinstance(item, dict) else item
                if isinstance(relative, str) and relative.strip():
                    try:
                        found = in_repository(f"{path}: env_file", project, relative)
                    except BadInput:
                        continue  # read() says it, with where
                    if found not in kept:
                        named[found] = ""
    return named
