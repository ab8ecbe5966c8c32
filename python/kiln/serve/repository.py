"""The model repository, laid out as Triton's: <root>/<model>/<version>/model.onnx (or model.kiln),
<root>/<model>/config.pbtxt or config.json. Tracks each model's state (READY, LOADING,
UNLOADING, UNAVAILABLE with the reason), loads and unloads models while the server runs."""

from __future__ import annotations

import asyncio
import collections
import logging
import pathlib

from kiln.serve.errors import not_found, unavailable
from kiln.serve.loaded_model import LoadedModel, load_version, start_version
from kiln.serve.options import ServerOptions
from kiln.serve.model_config import read_model_config

log = logging.getLogger("kiln.serve")


def select_versions(model_dir: pathlib.Path, config) -> list[str]:
    """The version folders the config's version_policy serves (default: the latest one)."""
    present = sorted((int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()))
    if not present:
        raise ValueError(f"{model_dir}: no version folder (a folder named by a number, such as 1/)")
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        chosen = present
    elif choice == "specific":
        missing = [v for v in policy.specific.versions if v not in present]
        if missing:
            raise ValueError(f"{model_dir}: version_policy names versions {missing} that have no folder")
        chosen = sorted(policy.specific.versions)
    else:
        count = policy.latest.num_versions if choice == "latest" and policy.latest.num_versions > 0 else 1
        chosen = present[-count:]
    return [str(v) for v in chosen]


class ModelRepository:
    def __init__(self, root: pathlib.Path, options: ServerOptions) -> None:
        if not root.is_dir():
            raise FileNotFoundError(f"model repository {root} is not a folder")
        self.root = root
        self.options = options
        self._models: dict[str, dict[str, LoadedModel]] = {}
        self._states: dict[str, tuple[str, str]] = {}
        self._locks: dict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)

    def model_names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    async def load_all(self) -> None:
        for name in self.model_names():
            await self.load(name)

    async def load(self, name: str) -> None:
        """Loads (or reloads) a model from disk; a failure leaves it UNAVAILABLE with the reason
        instead of raising, and the other models keep serving."""
        model_dir = self.root / name
        if name not in self.model_names():
            raise not_found(f"model '{name}' is not in the repository {self.root}")
        async with self._locks[name]:
            await self._close(name)
            self._states[name] = ("LOADING", "")
            try:
                versions = await self._load_versions(name, model_dir)
            except Exception as e:  # any load failure becomes the model's reason
                reason = str(e) or type(e).__name__
                log.error("model '%s' failed to load: %s", name, reason)
                self._states[name] = ("UNAVAILABLE", reason)
                return
            self._models[name] = versions
            self._states[name] = ("READY", "")
            log.info("model '%s' ready: versions %s", name, ", ".join(versions))

    async def _load_versions(self, name: str, model_dir: pathlib.Path) -> dict[str, LoadedModel]:
        config = read_model_config(model_dir)
        if config.name and config.name != name:
            raise ValueError(f"{model_dir}: config name '{config.name}' is not the folder's name '{name}'")
        config.name = name
        loop = asyncio.get_running_loop()
        loaded: dict[str, LoadedModel] = {}
        try:
            for version in select_versions(model_dir, config):
                version_config = type(config)()
                version_config.CopyFrom(config)
                runner, instances = await loop.run_in_executor(
                    None, load_version, name, version, model_dir / version, version_config, self.options
                )
                loaded[version] = start_version(name, version, version_config, runner, instances, self.options)
        except BaseException:
            for model in loaded.values():
                await model.scheduler.close()
            raise
        return loaded

    async def unload(self, name: str) -> None:
        if name not in self._states:
            raise not_found(f"model '{name}' is not in the repository {self.root}")
        async with self._locks[name]:
            await self._close(name)
            self._states[name] = ("UNAVAILABLE", "unloaded")

    async def _close(self, name: str) -> None:
        versions = self._models.pop(name, {})
        if versions:
            self._states[name] = ("UNLOADING", "")
        for model in versions.values():
            await model.scheduler.close()

    async def close(self) -> None:
        for name in list(self._models):
            await self.unload(name)

    def index(self) -> list[dict]:
        """Triton's repository index: one entry per loaded version, one per model otherwise."""
        entries = []
        for name in sorted(set(self.model_names()) | set(self._states)):
            state, reason = self._states.get(name, ("UNAVAILABLE", "not loaded"))
            versions = self._models.get(name, {})
            if versions:
                entries += [{"name": name, "version": v, "state": state, "reason": reason} for v in versions]
            else:
                entries.append({"name": name, "state": state, "reason": reason})
        return entries

    def state(self, name: str) -> tuple[str, str]:
        if name not in self._states and name not in self.model_names():
            raise not_found(f"model '{name}' is not in the repository {self.root}")
        return self._states.get(name, ("UNAVAILABLE", "not loaded"))

    def versions(self, name: str) -> dict[str, LoadedModel]:
        state, reason = self.state(name)
        if state != "READY":
            raise unavailable(f"model '{name}' is not ready: {state}" + (f" ({reason})" if reason else ""))
        return self._models[name]

    def get(self, name: str, version: str | None = None) -> LoadedModel:
        """The ready model version (the latest loaded one when version is None or empty)."""
        versions = self.versions(name)
        if not version:
            return versions[max(versions, key=int)]
        if version not in versions:
            raise not_found(f"model '{name}' has no version {version} loaded (loaded: {', '.join(versions)})")
        return versions[version]

    def all_stats(self):
        for versions in list(self._models.values()):
            for model in versions.values():
                yield model.stats

    def ready(self) -> bool:
        """Server readiness (Triton's strict readiness): every model of the repository is READY,
        except those unloaded on request."""
        states = [self._states.get(name, ("", "")) for name in self.model_names()]
        return all(state == "READY" or reason == "unloaded" for state, reason in states)
