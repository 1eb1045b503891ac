"""One service of a dev container's Compose files, read into what the launcher applies: its
image or build, variables, command, volumes of the clone's own, dependencies and health check.
Every other key is named as not applied (with why) or ignored."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from shadowclone.environment.compose_yaml import (
    argv,
    dotenv,
    duration,
    fail,
    in_repository,
    string,
    table,
)
from shadowclone.errors import BadInput

VOLUME_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")

IGNORED = frozenset(
    {"ports", "expose", "restart", "container_name", "hostname", "domainname", "labels"}
    | {"logging", "deploy", "stdin_open", "tty", "init", "networks", "stop_signal"}
    | {"stop_grace_period", "mac_address", "scale", "develop", "pull_policy", "profiles"}
    | {"annotations", "attach"}
)
"""What only concerns a host or a tool (nothing of a clone's services is published)."""
NOT_APPLIED = {
    "privileged": "a service never gets more than Docker's default capabilities",
    "cap_add": "a service never gets more than Docker's default capabilities",
    "devices": "a service reaches no device of the host",
    "pid": "a service shares no namespace of the host",
    "ipc": "a service shares no namespace of the host",
    "userns_mode": "a service shares no namespace of the host",
    "cgroup_parent": "the launcher sets a service's control group",
    "security_opt": "the launcher sets a service's security options",
    "sysctls": "not applied yet",
    "ulimits": "not applied yet",
    "shm_size": "not applied yet",
    "extra_hosts": "not applied yet",
    "dns": "not applied yet",
    "secrets": "a service gets none of the owner's secrets",
    "configs": "not applied yet",
    "platform": "services run on this machine's platform",
    "cpus": "not applied yet",
    "mem_limit": "not applied yet",
    "links": "services reach each other by name on the clone's network",
    "external_links": "services reach each other by name on the clone's network",
    "volumes_from": "not applied yet",
}
APPLIED = frozenset(
    {"image", "build", "environment", "env_file", "command", "entrypoint", "working_dir"}
    | {"user", "volumes", "tmpfs", "depends_on", "healthcheck", "network_mode"}
)
CLONE_APPLIED = frozenset(
    {"image", "build", "environment", "env_file", "depends_on", "network_mode"}
)
"""What the clone's own service gives the clone: it runs shadowclone's program, as its user,
and mounts nothing of the host."""


@attrs.frozen
class Healthcheck:
    test: tuple[str, ...]
    """Docker's form: ["CMD", ...], ["CMD-SHELL", line] or ["NONE"]."""
    interval_s: float | None = None
    timeout_s: float | None = None
    retries: int | None = None
    start_period_s: float | None = None


@attrs.frozen
class Volume:
    """A volume of the clone's own (never one of the host's folders) mounted in a service."""

    name: str
    """The Compose file's name for it; the same name in two services is one volume."""
    target: str
    read_only: bool = False


@attrs.frozen
class Service:
    name: str
    image: str | None = None
    dockerfile: str | None = None
    """The Dockerfile that makes it, a path in the repository."""
    context: str | None = None
    build_args: Mapping[str, str] = attrs.field(factory=dict)
    environment: Mapping[str, str] = attrs.field(factory=dict)
    command: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None
    working_dir: str | None = None
    user: str | None = None
    volumes: tuple[Volume, ...] = ()
    tmpfs: tuple[str, ...] = ()
    depends_on: Mapping[str, str] = attrs.field(factory=dict)
    """The services it needs, each with the condition it waits for (`service_started`,
    `service_healthy`, `service_completed_successfully`)."""
    healthcheck: Healthcheck | None = None
    network_mode: str | None = None
    """`service:NAME` (it shares that service's network) or `none`; None: the clone's network."""


class ServiceReader:
    """The services of the merged files, each read into a `Service`; what is not applied is
    gathered on the way."""

    def __init__(
        self,
        files: Sequence[str],
        project: str,
        kept: Mapping[str, str],
        written: Mapping[tuple[str, str], Sequence[str]] | None = None,
    ) -> None:
        """`written`: by (service, key), the files whose value of it the merge kept."""
        self.files = files
        self.project = project
        self.kept = kept
        self.written = written or {}
        self.not_applied: dict[str, str] = {}
        self.ignored: set[str] = set()

    def where(self, name: str, key: str) -> str:
        """The key, in the file that wrote it (all of them when the files' values merge)."""
        files = self.written.get((name, key)) or self.files
        return f"{' + '.join(files)}: services.{name}.{key}"

    def service(self, name: str, data: Mapping[str, Any], clone: bool) -> Service:
        for written, value in data.items():
            key = str(written)
            if key.startswith("x-") or value in (None, [], {}, False):
                continue
            where = self.where(name, key)
            applied = CLONE_APPLIED if clone else APPLIED
            if key in applied:
                continue
            if key in IGNORED or (clone and key in APPLIED | {"ports"}):
                self.ignored.add(f"services.{name}.{key}")
            elif key in NOT_APPLIED:
                self.not_applied[where] = NOT_APPLIED[key]
            elif key == "extends":
                raise BadInput(f"{where}: not supported: write the service out in one file")
            else:
                self.not_applied[where] = "not a key shadowclone knows"
        image = data.get("image")
        dockerfile, context, args = self.build(name, data.get("build"))
        if image is None and dockerfile is None:
            raise fail(self.where(name, "image"), "image or build")
        environment = self.env_files(name, data.get("env_file"))
        environment.update(table(self.where(name, "environment"), data.get("environment")))
        return Service(
            name=name,
            image=string(self.where(name, "image"), image) if image is not None else None,
            dockerfile=dockerfile,
            context=context,
            build_args=args,
            environment={key: value for key, value in environment.items() if value is not None},
            command=self.argv(name, "command", data, clone),
            entrypoint=self.argv(name, "entrypoint", data, clone),
            working_dir=self.text(name, "working_dir", data, clone),
            user=self.text(name, "user", data, clone),
            volumes=() if clone else self.volumes(name, data.get("volumes")),
            tmpfs=() if clone else tuple(self.tmpfs(name, data.get("tmpfs"))),
            depends_on=self.depends_on(name, data.get("depends_on")),
            healthcheck=None if clone else self.healthcheck(name, data.get("healthcheck")),
            network_mode=self.network_mode(name, data.get("network_mode")),
        )

    def argv(
        self, name: str, key: str, data: Mapping[str, Any], clone: bool
    ) -> tuple[str, ...] | None:
        found = argv(self.where(name, key), data.get(key))
        return None if clone or found is None else tuple(found)

    def text(self, name: str, key: str, data: Mapping[str, Any], clone: bool) -> str | None:
        value = data.get(key)
        return None if clone or value is None else string(self.where(name, key), value)

    def build(self, name: str, value: object) -> tuple[str | None, str | None, dict[str, str]]:
        if value is None:
            return None, None, {}
        where = self.where(name, "build")
        build = {"context": value} if isinstance(value, str) else value
        if not isinstance(build, dict):
            raise fail(where, "a folder or a mapping with context, dockerfile and args")
        for key in sorted(set(build) - {"context", "dockerfile", "args"}):
            self.not_applied[f"{where}.{key}"] = "not applied yet"
        context = in_repository(f"{where}.context", self.project, build.get("context", "."))
        dockerfile = in_repository(
            f"{where}.dockerfile", context, build.get("dockerfile", "Dockerfile")
        )
        args = table(f"{where}.args", build.get("args"))
        return dockerfile, context, {key: value for key, value in args.items() if value is not None}

    def env_files(self, name: str, value: object) -> dict[str, str | None]:
        where = self.where(name, "env_file")
        listed = [value] if isinstance(value, (str, dict)) else value or []
        if not isinstance(listed, list):
            raise fail(where, "a path or a list of paths")
        found: dict[str, str | None] = {}
        for item in listed:
            required, relative = True, item
            if isinstance(item, dict):
                required, relative = bool(item.get("required", True)), item.get("path")
            path = in_repository(where, self.project, relative)
            if path in self.kept:
                found.update(dotenv(path, self.kept[path]))
            elif required:
                raise BadInput(f"{where}: {path} is not a file of the repository")
        return found

    def volumes(self, name: str, value: object) -> tuple[Volume, ...]:
        where = self.where(name, "volumes")
        if value is None:
            return ()
        if not isinstance(value, list):
            raise fail(where, "a list of volumes")
        volumes: list[Volume] = []
        for index, item in enumerate(value):
            at = f"{where}[{index}]"
            if isinstance(item, dict):
                kind = item.get("type", "volume")
                source, target = item.get("source"), item.get("target")
                read_only = bool(item.get("read_only", False))
            else:
                parts = string(at, item).split(":")
                if len(parts) == 1:
                    kind, source, target, read_only = "volume", None, parts[0], False
                else:
                    source, target = parts[0], parts[1]
                    read_only = len(parts) > 2 and "ro" in parts[2].split(",")
                    local = source.startswith((".", "/", "~"))
                    kind = "bind" if local else "volume"
            target = string(f"{at}.target", target)
            if not target.startswith("/"):
                raise fail(f"{at}.target", "an absolute path in the container")
            if kind == "tmpfs":
                self.not_applied[at] = "not applied yet: use tmpfs"
            elif kind != "volume":
                self.not_applied[at] = "a service mounts nothing of the host"
            else:
                named = string(f"{at}.source", source) if source else f"{name}-{index}"
                if not VOLUME_NAME.fullmatch(named):
                    raise fail(f"{at}.source", "a volume name (letters, digits, _ . -)")
                volumes.append(Volume(named, target, read_only))
        return tuple(volumes)

    def tmpfs(self, name: str, value: object) -> Iterator[str]:
        listed = [value] if isinstance(value, str) else value or []
        if not isinstance(listed, list):
            raise fail(self.where(name, "tmpfs"), "a path or a list of paths")
        for index, item in enumerate(listed):
            path = string(f"{self.where(name, 'tmpfs')}[{index}]", item)
            if not path.startswith("/"):
                raise fail(f"{self.where(name, 'tmpfs')}[{index}]", "an absolute path")
            yield path

    def depends_on(self, name: str, value: object) -> dict[str, str]:
        where = self.where(name, "depends_on")
        if value is None:
            return {}
        if isinstance(value, list):
            return {
                string(f"{where}[{i}]", item): "service_started" for i, item in enumerate(value)
            }
        if not isinstance(value, dict):
            raise fail(where, "a list of services or a mapping")
        found: dict[str, str] = {}
        conditions = ("service_started", "service_healthy", "service_completed_successfully")
        for other, options in value.items():
            if options is not None and not isinstance(options, dict):
                raise fail(f"{where}.{other}", "a mapping with a condition")
            condition = (options or {}).get("condition", "service_started")
            if condition not in conditions:
                raise fail(f"{where}.{other}.condition", f"one of {', '.join(conditions)}")
            found[str(other)] = condition
        return found

    def healthcheck(self, name: str, value: object) -> Healthcheck | None:
        where = self.where(name, "healthcheck")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise fail(where, "a mapping")
        if value.get("disable"):
            return Healthcheck(("NONE",))
        test = value.get("test")
        if isinstance(test, str):
            argv: tuple[str, ...] = ("CMD-SHELL", test)
        elif isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL", "NONE"):
            argv = tuple(string(f"{where}.test[{i}]", item) for i, item in enumerate(test))
        else:
            raise fail(f"{where}.test", 'a command line or ["CMD", ...] or ["CMD-SHELL", line]')
        retries = value.get("retries")
        if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int)):
            raise fail(f"{where}.retries", "a whole number")
        return Healthcheck(
            test=argv,
            interval_s=duration(f"{where}.interval", value.get("interval")),
            timeout_s=duration(f"{where}.timeout", value.get("timeout")),
            retries=retries,
            start_period_s=duration(f"{where}.start_period", value.get("start_period")),
        )

    def network_mode(self, name: str, value: object) -> str | None:
        if value is None:
            return None
        mode = string(self.where(name, "network_mode"), value)
        if mode == "none" or mode.startswith("service:"):
            return mode
        self.not_applied[self.where(name, "network_mode")] = (
            "a service is on its clone's network (or none, or another service's)"
        )
        return None
