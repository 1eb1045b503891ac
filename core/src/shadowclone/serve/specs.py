"""A clone's `LaunchSpec`: what serve hands its launcher for one launch (one phase)."""

from __future__ import annotations

from urllib.parse import urlparse

from shadowclone import files
from shadowclone.environment.declared import cache_volumes
from shadowclone.environment.recipe import recipe_for
from shadowclone.plugin import contract
from shadowclone.plugin.types import LaunchSpec, NetworkMode
from shadowclone.relay.server import RelayFor
from shadowclone.serve.clones import Clone, Current


def launch_spec(
    current: Current,
    clone: Clone,
    network: NetworkMode = NetworkMode.OPEN,
    relay: RelayFor | None = None,
) -> LaunchSpec:
    config, paths = current.config, current.paths
    request = clone.request
    model_host = request.model_host
    if model_host is None and request.base_url:
        model_host = urlparse(request.base_url).netloc or None
    login_state = None
    if request.token_url:
        login_state = paths.login_state(request.login)
        login_state.mkdir(mode=0o700, parents=True, exist_ok=True)
    repo_cache = paths.repo_cache(request.target.repo_full_name)
    files.make_folder(repo_cache)
    files.check_plain_folder(repo_cache)  # a link is never followed, nor its target chmod-ed
    repo_cache.chmod(0o755)  # the engine's user reads the mirror in it, writes nothing
    environment = None
    if request.environment is not None and clone.record.image is None:
        environment = recipe_for(config, paths, request.target.repo_full_name)
    return LaunchSpec(
        clone_id=clone.id,
        run_folder=clone.folder.path,
        secrets_file=paths.secrets_file,
        image=clone.record.image or request.image,
        environment=environment,
        network=network,
        model_host=model_host,
        auth_host=urlparse(request.token_url).netloc or None if request.token_url else None,
        login_state=login_state,
        repo_cache=repo_cache,
        labels={contract.LABEL_CLONE: clone.id, contract.LABEL_TARGET: request.target.key},
        env={contract.CLONE_ID_VARIABLE: clone.id},
        cpus=config.limits.cpus,
        memory=config.limits.memory,
        # A network-off phase works for a stranger: nothing it writes may reach the
        # owner's next clones.
        caches=cache_volumes(request.target.repo_full_name, request.caches)
        if network is NetworkMode.OPEN
        else {},
        relay=relay(clone.id) if relay is not None else None,
    )
